"""Model uploads after a job SUCCEEDED (a template's `model_upload`): a domain the controller
runs. The rows (persistence.models.ModelUpload), the once-per-job guarantees and the job's
events are kept here; the calls to a registry of models are a narrow client the job's backend
gives (lifecycle.protocol.UploadsModels / ModelClient), so no backend touches the database."""
