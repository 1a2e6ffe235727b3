"""Shared capacity: who starts next when teams contend for one backend's capacity.

Pure (no database, no web, no backend): scheduler.schedule() takes the capacity, the teams'
shares, the running and the waiting jobs, and returns the jobs to start, the jobs to preempt
and where each other job stands, with the reason for each in words. The lifecycle feeds it
and applies its decisions, fenced like every other write."""
