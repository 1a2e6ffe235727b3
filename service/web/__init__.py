"""HTTP plumbing: problem+json, the docs pages, protocol and body limits, overload control, observability."""
