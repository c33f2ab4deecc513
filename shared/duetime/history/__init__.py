"""Execution history: run records archived from DynamoDB to Parquet in S3, queried with SQL."""
