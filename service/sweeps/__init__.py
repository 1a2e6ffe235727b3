"""Sweeps: many jobs from one template over a search space of its parameters.

schemas   the API's bodies and answers
space     the search space checked against the template's parameters -> each trial's values
service   create (validate every trial before anything is stored), read, rank, cancel
launcher  the controller's loop service: starts trials as room frees, ends sweeps
router    /v1/sweeps"""
