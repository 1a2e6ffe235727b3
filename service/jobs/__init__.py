"""Jobs: create, read, list, cancel (routes and domain service)."""
