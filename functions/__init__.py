"""Lambda functions: thin handlers over duetime's services."""
