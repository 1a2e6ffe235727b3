"""sweep pause: why a sweep is PAUSED (its creator's token was revoked)

Revision ID: 0008_sweep_pause
Revises: 0007_sweeps
"""
import sqlalchemy as sa
from alembic import op

revision = '0008_sweep_pause'
down_revision = '0007_sweeps'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('sweeps') as batch:
        batch.add_column(sa.Column('state_reason', sa.String(length=500), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('sweeps') as batch:
        batch.drop_column('state_reason')
