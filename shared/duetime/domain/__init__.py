"""The pure core: no AWS, no clock. Every function that needs the time takes `now`."""
