"""epoch history, the web UI's feed index and its signing secret

job_epochs: one row per finished epoch of a job (the charts); ix_jobs_updated_at: the
UI's live feed reads recently changed jobs; service_secrets: keys the service makes for
itself and shares between its workers (the UI's cookie-signing key).

Revision ID: 0004
Revises: 0003
"""
import sqlalchemy as sa
from alembic import op

import service.persistence.models

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('job_epochs',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('job_id', sa.Uuid(), nullable=False),
    sa.Column('epoch', sa.Integer(), nullable=False),
    sa.Column('metrics', sa.JSON(), nullable=False),
    sa.Column('steps', sa.BigInteger(), nullable=True),
    sa.Column('seconds', sa.Float(), nullable=True),
    sa.Column('at', service.persistence.models.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_job_epochs_job_id_jobs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_job_epochs')),
    sa.UniqueConstraint('job_id', 'epoch', name='uq_job_epochs_job_epoch')
    )
    op.create_table('service_secrets',
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('value', sa.String(length=256), nullable=False),
    sa.Column('created_at', service.persistence.models.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_service_secrets'))
    )
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index('ix_jobs_updated_at', ['updated_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_updated_at')
    op.drop_table('service_secrets')
    op.drop_table('job_epochs')
