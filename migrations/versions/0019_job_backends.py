"""placement across backends (issue 52.1): a job may accept several backends, most preferred
first (jobs.accepts, and a job_backends row each, which each backend's admission reads); the
launch attempt claims one, and jobs.placement says why there. Every existing job accepts its one
backend (accepts null, no rows): unchanged.

Revision ID: 0019_job_backends
Revises: 0018_class_min_runtime
"""
import sqlalchemy as sa
from alembic import op

revision = '0019_job_backends'
down_revision = '0018_class_min_runtime'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('accepts', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('placement', sa.String(length=500), nullable=True))
    op.create_table(
        'job_backends',
        sa.Column('job_id', sa.Uuid(), nullable=False),
        sa.Column('backend', sa.String(length=32), nullable=False),
        sa.Column('rank', sa.Integer(), nullable=False),
        sa.Column('demand', sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_job_backends_job_id_jobs'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('job_id', 'backend', name=op.f('pk_job_backends')),
    )
    op.create_index('ix_job_backends_backend', 'job_backends', ['backend', 'job_id'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_job_backends_backend', table_name='job_backends')
    op.drop_table('job_backends')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('placement')
        batch_op.drop_column('accepts')
