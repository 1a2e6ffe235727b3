"""Labels trainjobs sets on every CustomJob (members may not set `trainjobs_*` or `trainjobs-*` labels).

The job-id key has no hyphen: AIP-160 list filters read a leading `-` as negation
and name a field by letters, digits and `_`, so `labels.trainjobs_job_id:*` means the
same to every reading of the grammar. Jobs created before carry the old hyphenated
key; the Vertex backend still reads it."""
JOB_ID_LABEL = "trainjobs_job_id"
LEGACY_JOB_ID_LABEL = "trainjobs-job-id"
RESERVED_LABEL_PREFIXES = ("trainjobs_", "trainjobs-")
