"""budgets: per-team limits (team_limits) and each job's estimate at submit (job_costs)

team_limits: concurrent jobs, concurrent accelerators by type, spend per month, and
refuse|queue when a job would cross one; job_costs: the per-hour rate, timeout and
accelerators of each job, for adding up a team's use. An index on jobs (team_id,
ended_at) serves "jobs of this team that ended this month".

Revision ID: 0007_budgets
Revises: 0006
"""
import sqlalchemy as sa
from alembic import op

import service.persistence.models

revision = '0007_budgets'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('team_limits',
    sa.Column('team_id', sa.Uuid(), nullable=False),
    sa.Column('max_concurrent_jobs', sa.Integer(), nullable=True),
    sa.Column('max_accelerators', sa.JSON(), nullable=False),
    sa.Column('max_monthly_spend_micros', sa.BigInteger(), nullable=True),
    sa.Column('on_exceed', sa.String(length=8), nullable=False),
    sa.Column('checks', sa.BigInteger(), nullable=False),
    sa.Column('updated_at', service.persistence.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_by', sa.String(length=200), nullable=False),
    sa.ForeignKeyConstraint(['team_id'], ['teams.id'], name=op.f('fk_team_limits_team_id_teams'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('team_id', name=op.f('pk_team_limits'))
    )
    op.create_table('job_costs',
    sa.Column('job_id', sa.Uuid(), nullable=False),
    sa.Column('team_id', sa.Uuid(), nullable=False),
    sa.Column('per_hour_micros', sa.BigInteger(), nullable=False),
    sa.Column('timeout_seconds', sa.Integer(), nullable=False),
    sa.Column('complete', sa.Boolean(), nullable=False),
    sa.Column('accelerators', sa.JSON(), nullable=False),
    sa.Column('currency', sa.String(length=3), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_job_costs_job_id_jobs'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['team_id'], ['teams.id'], name=op.f('fk_job_costs_team_id_teams'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('job_id', name=op.f('pk_job_costs'))
    )
    with op.batch_alter_table('job_costs', schema=None) as batch_op:
        batch_op.create_index('ix_job_costs_team', ['team_id', 'job_id'], unique=False)
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index('ix_jobs_team_ended', ['team_id', 'ended_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_team_ended')
    with op.batch_alter_table('job_costs', schema=None) as batch_op:
        batch_op.drop_index('ix_job_costs_team')
    op.drop_table('job_costs')
    op.drop_table('team_limits')
