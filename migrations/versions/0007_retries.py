"""retries and relaunch: attempts of a job, their backoff, and the job a relaunch came from

jobs.attempt (1 for every job so far), jobs.retry_of (the first attempt, for attempts 2+),
jobs.not_before (a QUEUED attempt waits for its backoff), jobs.relaunch_of.

Revision ID: 0007_retries
Revises: 0007_budgets
"""
import sqlalchemy as sa
from alembic import op

import service.persistence.models

revision = '0007_retries'
down_revision = '0007_budgets'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(sa.Column('attempt', sa.Integer(), server_default='1', nullable=False))
        batch.add_column(sa.Column('retry_of', sa.Uuid(), nullable=True))
        batch.add_column(sa.Column('not_before', service.persistence.models.UTCDateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column('relaunch_of', sa.Uuid(), nullable=True))
        batch.create_foreign_key(batch.f('fk_jobs_retry_of_jobs'), 'jobs', ['retry_of'], ['id'])
        batch.create_foreign_key(batch.f('fk_jobs_relaunch_of_jobs'), 'jobs', ['relaunch_of'], ['id'])
        batch.create_unique_constraint('uq_jobs_retry_of_attempt', ['retry_of', 'attempt'])


def downgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.drop_constraint('uq_jobs_retry_of_attempt', type_='unique')
        batch.drop_constraint(batch.f('fk_jobs_relaunch_of_jobs'), type_='foreignkey')
        batch.drop_constraint(batch.f('fk_jobs_retry_of_jobs'), type_='foreignkey')
        batch.drop_column('relaunch_of')
        batch.drop_column('not_before')
        batch.drop_column('retry_of')
        batch.drop_column('attempt')
