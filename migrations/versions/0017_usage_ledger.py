"""the usage ledger (issue 52.3): per team, backend and hour, billing units used; each team's
decayed total per backend; the recompute's state (its watermark, half-life and weights)

Revision ID: 0017_usage_ledger
Revises: 0016_preempt_kind
"""
import sqlalchemy as sa
from alembic import op

from service.persistence.models import UTCDateTime

revision = '0017_usage_ledger'
down_revision = '0016_preempt_kind'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'usage_buckets',
        sa.Column('team_id', sa.Uuid(), nullable=False),
        sa.Column('backend', sa.String(length=32), nullable=False),
        sa.Column('hour', UTCDateTime(timezone=True), nullable=False),
        sa.Column('units', sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(['team_id'], ['teams.id'], name=op.f('fk_usage_buckets_team_id_teams'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('team_id', 'backend', 'hour', name=op.f('pk_usage_buckets')),
    )
    op.create_index('ix_usage_buckets_hour', 'usage_buckets', ['hour'], unique=False)
    op.create_table(
        'usage_totals',
        sa.Column('team_id', sa.Uuid(), nullable=False),
        sa.Column('backend', sa.String(length=32), nullable=False),
        sa.Column('units', sa.Float(), nullable=False),
        sa.Column('closed', sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(['team_id'], ['teams.id'], name=op.f('fk_usage_totals_team_id_teams'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('team_id', 'backend', name=op.f('pk_usage_totals')),
    )
    op.create_table(
        'usage_ledger',
        sa.Column('name', sa.String(length=32), nullable=False),
        sa.Column('refold_from', UTCDateTime(timezone=True), nullable=False),
        sa.Column('computed_at', UTCDateTime(timezone=True), nullable=False),
        sa.Column('half_life_seconds', sa.Float(), nullable=False),
        sa.Column('weights', sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint('name', name=op.f('pk_usage_ledger')),
    )


def downgrade() -> None:
    op.drop_table('usage_ledger')
    op.drop_table('usage_totals')
    op.drop_index('ix_usage_buckets_hour', table_name='usage_buckets')
    op.drop_table('usage_buckets')
