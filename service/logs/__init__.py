"""Job logs over HTTP: pages of lines with a cursor, or a Server-Sent Events
stream that follows the job until it ends. Backend-agnostic: every line comes
from Backend.read_logs (local files, Cloud Logging)."""
