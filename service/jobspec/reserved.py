"""Labels trainjobs sets on every CustomJob (members may not set `trainjobs-*` labels)."""
JOB_ID_LABEL = "trainjobs-job-id"
