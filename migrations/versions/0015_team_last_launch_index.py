"""each team's last launch on a backend by index: the scheduler's tie-break between teams that
stand alike (issue 47: at the defaults teams were served in the order of their names)

Revision ID: 0015_team_last_launch_index
Revises: 0014_launched_jobs_index
"""
from alembic import op

revision = '0015_team_last_launch_index'
down_revision = '0014_launched_jobs_index'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index('ix_jobs_backend_team_launch', ['backend', 'team_id', 'launch_attempted_at'],
                              unique=False)


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_backend_team_launch')
