"""sweeps: hyperparameter sweeps and the trials the controller started

sweeps: the search, its planned trials and its state; sweep_trials: one row per started
trial, keyed (sweep_id, number) so that no trial is ever started twice, linked to its job.

Revision ID: 0007_sweeps
Revises: 0007_retries
"""
import sqlalchemy as sa
from alembic import op

import service.persistence.models

revision = '0007_sweeps'
down_revision = '0007_retries'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('sweeps',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('team_id', sa.Uuid(), nullable=False),
    sa.Column('display_name', sa.String(length=128), nullable=False),
    sa.Column('template_id', sa.Uuid(), nullable=False),
    sa.Column('template_name', sa.String(length=63), nullable=False),
    sa.Column('template_version', sa.Integer(), nullable=False),
    sa.Column('backend', sa.String(length=32), nullable=False),
    sa.Column('algorithm', sa.String(length=16), nullable=False),
    sa.Column('request', sa.JSON(), nullable=False),
    sa.Column('plan', sa.JSON(), nullable=False),
    sa.Column('trial_count', sa.Integer(), nullable=False),
    sa.Column('max_parallel', sa.Integer(), nullable=False),
    sa.Column('objective_metric', sa.String(length=128), nullable=False),
    sa.Column('objective_goal', sa.String(length=8), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('actor', sa.JSON(), nullable=False),
    sa.Column('created_by', sa.String(length=200), nullable=False),
    sa.Column('created_at', service.persistence.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', service.persistence.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('ended_at', service.persistence.models.UTCDateTime(timezone=True), nullable=True),
    sa.Column('checked_at', service.persistence.models.UTCDateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['team_id'], ['teams.id'], name=op.f('fk_sweeps_team_id_teams')),
    sa.ForeignKeyConstraint(['template_id'], ['templates.id'], name=op.f('fk_sweeps_template_id_templates')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_sweeps'))
    )
    with op.batch_alter_table('sweeps', schema=None) as batch_op:
        batch_op.create_index('ix_sweeps_team_created', ['team_id', 'created_at', 'id'], unique=False)
        batch_op.create_index('ix_sweeps_state_checked', ['state', 'checked_at'], unique=False)

    op.create_table('sweep_trials',
    sa.Column('sweep_id', sa.Uuid(), nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('job_id', sa.Uuid(), nullable=True),
    sa.Column('parameters', sa.JSON(), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('stopped_early', sa.Text(), nullable=True),
    sa.Column('created_at', service.persistence.models.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_sweep_trials_job_id_jobs')),
    sa.ForeignKeyConstraint(['sweep_id'], ['sweeps.id'], name=op.f('fk_sweep_trials_sweep_id_sweeps'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('sweep_id', 'number', name=op.f('pk_sweep_trials')),
    sa.UniqueConstraint('job_id', name=op.f('uq_sweep_trials_job_id'))
    )


def downgrade() -> None:
    op.drop_table('sweep_trials')
    op.drop_table('sweeps')
