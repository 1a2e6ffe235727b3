"""a priority class's minimum runtime before its jobs may be preempted for priority (issue
52.5): null, as every existing class gets, is the setting's (TRAINJOBS_SCHEDULER_MIN_RUNTIME_SECONDS)

Revision ID: 0018_class_min_runtime
Revises: 0017_usage_ledger
"""
import sqlalchemy as sa
from alembic import op

revision = '0018_class_min_runtime'
down_revision = '0017_usage_ledger'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('priority_classes', schema=None) as batch_op:
        batch_op.add_column(sa.Column('min_runtime_seconds', sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('priority_classes', schema=None) as batch_op:
        batch_op.drop_column('min_runtime_seconds')
