"""Team budgets and quotas: concurrent jobs, concurrent accelerators by type and spend per
month, checked at submit (refuse) and at launch (queue), from the jobs' cost estimates."""
