"""The job lifecycle: the one place that decides a job's state.

states      the table of allowed moves
protocol    what a backend is (declared capabilities) and what it reports (facts)
sanitize    untrusted values (replica output, Google's answers) made storable
engine      the only writer: compare-and-set UPDATE ... WHERE state = :seen, one event per change
admission   the plan's contract (Plan, CapacityPlanner) and the rows it reads: the launched jobs, room
loop        one controller loop per backend: admit, cancel, poll, apply
leader      one controller per database (PostgreSQL advisory lock / SQLite file lock), fenced

Dependency rule (import-linter, tests/test_layers.py): web -> domains -> lifecycle <- backends.
"""
