"""shared capacity: backend capacity, team shares, priority classes, an audit log, and each
job's demand, priority and preemptions (issue 38)

Revision ID: 0013_shared_capacity
Revises: 0012_state_observed_at
"""
import sqlalchemy as sa
from alembic import op

import service.persistence.models

revision = '0013_shared_capacity'
down_revision = '0012_state_observed_at'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('audit_events',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('at', service.persistence.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('actor', sa.String(length=200), nullable=False),
    sa.Column('action', sa.String(length=64), nullable=False),
    sa.Column('subject', sa.String(length=200), nullable=False),
    sa.Column('before', sa.JSON(), nullable=True),
    sa.Column('after', sa.JSON(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_audit_events'))
    )
    with op.batch_alter_table('audit_events', schema=None) as batch_op:
        batch_op.create_index('ix_audit_events_at', ['at', 'id'], unique=False)

    op.create_table('backend_capacity',
    sa.Column('backend', sa.String(length=32), nullable=False),
    sa.Column('resource', sa.String(length=96), nullable=False),
    sa.Column('amount', sa.BigInteger(), nullable=False),
    sa.Column('updated_at', service.persistence.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_by', sa.String(length=200), nullable=False),
    sa.PrimaryKeyConstraint('backend', 'resource', name=op.f('pk_backend_capacity'))
    )
    op.create_table('priority_classes',
    sa.Column('name', sa.String(length=63), nullable=False),
    sa.Column('value', sa.Integer(), nullable=False),
    sa.Column('preempts', sa.Boolean(), nullable=False),
    sa.Column('teams', sa.JSON(), nullable=True),
    sa.Column('description', sa.String(length=500), nullable=False),
    sa.Column('updated_at', service.persistence.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_by', sa.String(length=200), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_priority_classes'))
    )
    op.create_table('team_shares',
    sa.Column('team_id', sa.Uuid(), nullable=False),
    sa.Column('backend', sa.String(length=32), nullable=False),
    sa.Column('nominal', sa.JSON(), nullable=False),
    sa.Column('borrowing_limit', sa.JSON(), nullable=False),
    sa.Column('lending_limit', sa.JSON(), nullable=False),
    sa.Column('weight', sa.Float(), nullable=False),
    sa.Column('updated_at', service.persistence.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_by', sa.String(length=200), nullable=False),
    sa.ForeignKeyConstraint(['team_id'], ['teams.id'], name=op.f('fk_team_shares_team_id_teams'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('team_id', 'backend', name=op.f('pk_team_shares'))
    )
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('demand', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('priority_class', sa.String(length=63), nullable=True))
        batch_op.add_column(sa.Column('priority', sa.Integer(), server_default='0', nullable=False))
        batch_op.add_column(sa.Column('may_preempt', sa.Boolean(), server_default='0', nullable=False))
        batch_op.add_column(sa.Column('preemptions', sa.Integer(), server_default='0', nullable=False))
        batch_op.add_column(sa.Column('preempt_requested_at', service.persistence.models.UTCDateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('preempted_for', sa.Uuid(), nullable=True))
        batch_op.add_column(sa.Column('preempt_reason', sa.String(length=500), nullable=True))
        batch_op.add_column(sa.Column('nominated_at', service.persistence.models.UTCDateTime(timezone=True), nullable=True))



def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('nominated_at')
        batch_op.drop_column('preempt_reason')
        batch_op.drop_column('preempted_for')
        batch_op.drop_column('preempt_requested_at')
        batch_op.drop_column('preemptions')
        batch_op.drop_column('may_preempt')
        batch_op.drop_column('priority')
        batch_op.drop_column('priority_class')
        batch_op.drop_column('demand')

    op.drop_table('team_shares')
    op.drop_table('priority_classes')
    op.drop_table('backend_capacity')
    with op.batch_alter_table('audit_events', schema=None) as batch_op:
        batch_op.drop_index('ix_audit_events_at')

    op.drop_table('audit_events')
