"""Adapters for the ports in duetime.ports: DynamoDB/SQS and in-memory twins."""
