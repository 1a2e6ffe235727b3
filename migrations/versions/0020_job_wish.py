"""a job's placement wish (issue 52.2): jobs.wish, the preference among the backends it accepts
(listed, cheapest, soonest), its start_by deadline and its price per hour on each, resolved at
submit. Every existing job: null, the listed order as before.

Revision ID: 0020_job_wish
Revises: 0019_job_backends
"""
import sqlalchemy as sa
from alembic import op

revision = '0020_job_wish'
down_revision = '0019_job_backends'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('wish', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('wish')
