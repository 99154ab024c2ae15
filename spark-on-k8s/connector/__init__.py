"""PySpark data source for TinyStream topics (format "tinystream")."""
