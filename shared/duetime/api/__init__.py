"""The HTTP API: routes (app), JSON shapes (views), quotas and the OpenAPI document."""
