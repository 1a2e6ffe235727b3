"""webhooks: subscriptions, the delivery outbox and log, attempts

webhook_subscriptions: a team's webhooks; webhook_deliveries: one row per event per
subscription, written in the transaction of the job change (the outbox) and kept as the
delivery log; webhook_attempts: each HTTP request of a delivery.

Revision ID: 0006
Revises: 0005
"""
import sqlalchemy as sa
from alembic import op

import service.persistence.models

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('webhook_subscriptions',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('team_id', sa.Uuid(), nullable=False),
    sa.Column('url', sa.String(length=2048), nullable=False),
    sa.Column('event_types', sa.JSON(), nullable=False),
    sa.Column('format', sa.String(length=16), nullable=False),
    sa.Column('description', sa.String(length=200), nullable=False),
    sa.Column('secret', sa.String(length=128), nullable=False),
    sa.Column('created_at', service.persistence.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('created_by', sa.String(length=200), nullable=False),
    sa.Column('paused_at', service.persistence.models.UTCDateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['team_id'], ['teams.id'], name=op.f('fk_webhook_subscriptions_team_id_teams'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_subscriptions'))
    )
    with op.batch_alter_table('webhook_subscriptions', schema=None) as batch_op:
        batch_op.create_index('ix_webhook_subscriptions_team_created', ['team_id', 'created_at', 'id'], unique=False)

    op.create_table('webhook_deliveries',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('subscription_id', sa.Uuid(), nullable=False),
    sa.Column('message_id', sa.String(length=64), nullable=False),
    sa.Column('event_type', sa.String(length=64), nullable=False),
    sa.Column('job_id', sa.Uuid(), nullable=True),
    sa.Column('payload', sa.JSON(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', service.persistence.models.UTCDateTime(timezone=True), nullable=True),
    sa.Column('last_attempt_at', service.persistence.models.UTCDateTime(timezone=True), nullable=True),
    sa.Column('last_status_code', sa.Integer(), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('delivered_at', service.persistence.models.UTCDateTime(timezone=True), nullable=True),
    sa.Column('redelivery_of', sa.Uuid(), nullable=True),
    sa.Column('created_at', service.persistence.models.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['subscription_id'], ['webhook_subscriptions.id'],
                            name=op.f('fk_webhook_deliveries_subscription_id_webhook_subscriptions'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_deliveries'))
    )
    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.create_index('ix_webhook_deliveries_status_next', ['status', 'next_attempt_at'], unique=False)
        batch_op.create_index('ix_webhook_deliveries_subscription_created',
                              ['subscription_id', 'created_at', 'id'], unique=False)
        batch_op.create_index('ix_webhook_deliveries_created', ['created_at'], unique=False)

    op.create_table('webhook_attempts',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('delivery_id', sa.Uuid(), nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('at', service.persistence.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('status_code', sa.Integer(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('response_body', sa.Text(), nullable=False),
    sa.Column('duration_ms', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['delivery_id'], ['webhook_deliveries.id'],
                            name=op.f('fk_webhook_attempts_delivery_id_webhook_deliveries'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_attempts'))
    )
    with op.batch_alter_table('webhook_attempts', schema=None) as batch_op:
        batch_op.create_index('ix_webhook_attempts_delivery', ['delivery_id', 'number'], unique=False)


def downgrade() -> None:
    op.drop_table('webhook_attempts')
    op.drop_table('webhook_deliveries')
    op.drop_table('webhook_subscriptions')
