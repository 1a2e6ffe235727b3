"""model uploads: a Vertex job's model upload after it SUCCEEDED (issue 26, point 1)

Revision ID: 0009_model_uploads
Revises: 0008_sweep_pause
"""
import sqlalchemy as sa
from alembic import op

import service.persistence.models

revision = '0009_model_uploads'
down_revision = '0008_sweep_pause'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('model_uploads',
    sa.Column('job_id', sa.Uuid(), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('model', sa.String(length=512), nullable=True),
    sa.Column('message', sa.Text(), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_at', service.persistence.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', service.persistence.models.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_model_uploads_job_id_jobs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('job_id', name=op.f('pk_model_uploads'))
    )
    op.create_index('ix_model_uploads_due', 'model_uploads', ['state', 'next_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_model_uploads_due', table_name='model_uploads')
    op.drop_table('model_uploads')
