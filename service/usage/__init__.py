"""The usage ledger (issue 52.3): what each team used of every backend, in one currency (billing
units), decayed with a half-life; fair share between teams reads it (docs/queue.md)."""
