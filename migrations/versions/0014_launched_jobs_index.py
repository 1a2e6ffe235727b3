"""the controller's launched jobs by index: a partial index of the jobs with a backend_ref
(issue 39: each pass read every QUEUED job through ix_jobs_backend_state_created)

Revision ID: 0014_launched_jobs_index
Revises: 0013_shared_capacity
"""
import sqlalchemy as sa
from alembic import op

revision = '0014_launched_jobs_index'
down_revision = '0013_shared_capacity'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index('ix_jobs_backend_launched', ['backend', 'state', 'created_at', 'id'], unique=False,
                              postgresql_where=sa.text('backend_ref IS NOT NULL'),
                              sqlite_where=sa.text('backend_ref IS NOT NULL'))


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_backend_launched')
