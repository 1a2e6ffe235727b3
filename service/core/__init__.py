"""The core every package may use: settings (the config root), domain errors, pagination, storable text, the request-body base."""
