"""name lookups: jobs and sweeps found by display name within a team (issue 25, point 2:
`trainjobs jobs logs my-run`), newest first, without scanning the team's rows

Revision ID: 0011_name_lookups
Revises: 0009_model_uploads
"""
from alembic import op

revision = '0011_name_lookups'
down_revision = '0009_model_uploads'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index('ix_jobs_team_name_created', 'jobs', ['team_id', 'display_name', 'created_at', 'id'],
                    unique=False)
    op.create_index('ix_sweeps_team_name_created', 'sweeps', ['team_id', 'display_name', 'created_at', 'id'],
                    unique=False)


def downgrade() -> None:
    op.drop_index('ix_sweeps_team_name_created', table_name='sweeps')
    op.drop_index('ix_jobs_team_name_created', table_name='jobs')
