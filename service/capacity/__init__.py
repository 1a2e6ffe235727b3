"""Shared capacity: what each backend may run at once, each team's share of it, priority
classes, and the admission plan the controller carries out (docs/queue.md). The decisions
themselves are the pure scheduler's (service/scheduling); this package reads the rows it needs,
keeps the operator's settings (audited), and turns the scheduler's decision into the lifecycle's
Plan (service/lifecycle/admission.py)."""
