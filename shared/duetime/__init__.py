"""duetime: a serverless distributed job scheduler on AWS primitives."""

__version__ = "0.1.0"
