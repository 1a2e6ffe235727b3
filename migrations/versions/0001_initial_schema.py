"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-21 19:38:13.035162
"""
import sqlalchemy as sa
from alembic import op

import service.persistence.models

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table('teams',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('name', sa.String(length=63), nullable=False),
    sa.Column('created_at', service.persistence.models.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_teams')),
    sa.UniqueConstraint('name', name=op.f('uq_teams_name'))
    )
    op.create_table('api_tokens',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('team_id', sa.Uuid(), nullable=False),
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('prefix', sa.String(length=16), nullable=False),
    sa.Column('created_at', service.persistence.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('created_by', sa.String(length=200), nullable=False),
    sa.Column('revoked_at', service.persistence.models.UTCDateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['team_id'], ['teams.id'], name=op.f('fk_api_tokens_team_id_teams'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_tokens')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_api_tokens_token_hash'))
    )
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_api_tokens_team_id'), ['team_id'], unique=False)

    op.create_table('templates',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('team_id', sa.Uuid(), nullable=False),
    sa.Column('name', sa.String(length=63), nullable=False),
    sa.Column('latest_version', sa.Integer(), nullable=False),
    sa.Column('archived_at', service.persistence.models.UTCDateTime(timezone=True), nullable=True),
    sa.Column('created_at', service.persistence.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', service.persistence.models.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['team_id'], ['teams.id'], name=op.f('fk_templates_team_id_teams')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_templates')),
    sa.UniqueConstraint('team_id', 'name', name='uq_templates_team_name')
    )
    op.create_table('jobs',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('team_id', sa.Uuid(), nullable=False),
    sa.Column('idempotency_key', sa.String(length=255), nullable=True),
    sa.Column('request_hash', sa.String(length=64), nullable=True),
    sa.Column('display_name', sa.String(length=128), nullable=False),
    sa.Column('template_id', sa.Uuid(), nullable=False),
    sa.Column('template_name', sa.String(length=63), nullable=False),
    sa.Column('template_version', sa.Integer(), nullable=False),
    sa.Column('backend', sa.String(length=32), nullable=False),
    sa.Column('state', sa.String(length=32), nullable=False),
    sa.Column('parameters', sa.JSON(), nullable=False),
    sa.Column('overrides', sa.JSON(), nullable=False),
    sa.Column('labels', sa.JSON(), nullable=False),
    sa.Column('compiled', sa.JSON(), nullable=False),
    sa.Column('backend_ref', sa.String(length=512), nullable=True),
    sa.Column('console_url', sa.String(length=1024), nullable=True),
    sa.Column('error', sa.JSON(), nullable=True),
    sa.Column('progress', sa.JSON(), nullable=True),
    sa.Column('created_by', sa.String(length=200), nullable=False),
    sa.Column('created_at', service.persistence.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', service.persistence.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('started_at', service.persistence.models.UTCDateTime(timezone=True), nullable=True),
    sa.Column('ended_at', service.persistence.models.UTCDateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['team_id'], ['teams.id'], name=op.f('fk_jobs_team_id_teams')),
    sa.ForeignKeyConstraint(['template_id'], ['templates.id'], name=op.f('fk_jobs_template_id_templates')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_jobs')),
    sa.UniqueConstraint('team_id', 'idempotency_key', name='uq_jobs_team_idempotency_key')
    )
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index('ix_jobs_backend_state_created', ['backend', 'state', 'created_at', 'id'], unique=False)
        batch_op.create_index('ix_jobs_team_created', ['team_id', 'created_at', 'id'], unique=False)
        batch_op.create_index('ix_jobs_team_state_created', ['team_id', 'state', 'created_at', 'id'], unique=False)
        batch_op.create_index('ix_jobs_team_template_created', ['team_id', 'template_name', 'created_at', 'id'], unique=False)

    op.create_table('template_versions',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('template_id', sa.Uuid(), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('spec', sa.JSON(), nullable=False),
    sa.Column('parameters', sa.JSON(), nullable=False),
    sa.Column('created_at', service.persistence.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('created_by', sa.String(length=200), nullable=False),
    sa.ForeignKeyConstraint(['template_id'], ['templates.id'], name=op.f('fk_template_versions_template_id_templates'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_template_versions')),
    sa.UniqueConstraint('template_id', 'version', name='uq_template_versions_template_version')
    )
    op.create_table('job_events',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('job_id', sa.Uuid(), nullable=False),
    sa.Column('from_state', sa.String(length=32), nullable=True),
    sa.Column('to_state', sa.String(length=32), nullable=False),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('actor', sa.String(length=200), nullable=False),
    sa.Column('at', service.persistence.models.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_job_events_job_id_jobs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_job_events'))
    )
    with op.batch_alter_table('job_events', schema=None) as batch_op:
        batch_op.create_index('ix_job_events_job', ['job_id', 'id'], unique=False)

    op.create_table('job_labels',
    sa.Column('job_id', sa.Uuid(), nullable=False),
    sa.Column('key', sa.String(length=64), nullable=False),
    sa.Column('value', sa.String(length=64), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_job_labels_job_id_jobs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('job_id', 'key', name=op.f('pk_job_labels'))
    )
    with op.batch_alter_table('job_labels', schema=None) as batch_op:
        batch_op.create_index('ix_job_labels_key_value', ['key', 'value', 'job_id'], unique=False)




def downgrade() -> None:

    with op.batch_alter_table('job_labels', schema=None) as batch_op:
        batch_op.drop_index('ix_job_labels_key_value')

    op.drop_table('job_labels')
    with op.batch_alter_table('job_events', schema=None) as batch_op:
        batch_op.drop_index('ix_job_events_job')

    op.drop_table('job_events')
    op.drop_table('template_versions')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_team_template_created')
        batch_op.drop_index('ix_jobs_team_state_created')
        batch_op.drop_index('ix_jobs_team_created')
        batch_op.drop_index('ix_jobs_backend_state_created')

    op.drop_table('jobs')
    op.drop_table('templates')
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_api_tokens_team_id'))

    op.drop_table('api_tokens')
    op.drop_table('teams')

