"""state observed at: when the backend last confirmed a job's state (issue 39, point 2:
Vertex jobs are followed within a call budget, and the job view says how old the state is)

Revision ID: 0012_state_observed_at
Revises: 0011_name_lookups
"""
import sqlalchemy as sa
from alembic import op

import service.persistence.models

revision = '0012_state_observed_at'
down_revision = '0011_name_lookups'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs') as batch_op:
        batch_op.add_column(sa.Column('state_observed_at', service.persistence.models.UTCDateTime(timezone=True),
                                      nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('jobs') as batch_op:
        batch_op.drop_column('state_observed_at')
