"""The simulated backend (`sim`): a job is a timer of the length it names, no process starts.
Its states still go through the real controller, engine, store and events (docs/sim.md)."""
