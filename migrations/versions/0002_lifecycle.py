"""lifecycle: controller lease (fencing epoch), launch attempts

Revision ID: 0003
Revises: 0001
"""
import sqlalchemy as sa
from alembic import op

import service.persistence.models

revision = '0003'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'controller_leases',
        sa.Column('name', sa.String(length=32), nullable=False),
        sa.Column('epoch', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
        sa.Column('holder', sa.String(length=300), nullable=False),
        sa.Column('acquired_at', service.persistence.models.UTCDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('name', name=op.f('pk_controller_leases')),
    )
    op.execute("INSERT INTO controller_leases (name, epoch, holder) VALUES ('controller', 0, '')")
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(sa.Column('launch_attempted_at', service.persistence.models.UTCDateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.drop_column('launch_attempted_at')
    op.drop_table('controller_leases')
