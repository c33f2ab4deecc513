"""Until the re-layout's branches are merged: the old name of duetime.settings, for the modules
another branch is changing (services/*, adapters/*, cli.py, cli_dlq.py). Removed at the merge,
once they import duetime.settings."""

from __future__ import annotations

from duetime.settings import Env, QueueUrls, Settings, queue_key, queue_name

__all__ = ["Env", "QueueUrls", "Settings", "queue_key", "queue_name"]
