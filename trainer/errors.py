"""The one error type the entry turns into a one-line message and exit code 2."""


class ConfigError(Exception):
    """The job is misconfigured (flags, TF_CONFIG, missing data): retrying won't help."""
