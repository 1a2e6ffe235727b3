"""a column for a preemption's kind (reclaim, priority): it was stored in the reason's text as
"<kind>: <why>" and parsed back (issue 50.2); rows written so are split

Revision ID: 0016_preempt_kind
Revises: 0015_team_last_launch_index
"""
import sqlalchemy as sa
from alembic import op

revision = '0016_preempt_kind'
down_revision = '0015_team_last_launch_index'
branch_labels = None
depends_on = None

KINDS = ("reclaim", "priority")


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('preempt_kind', sa.String(length=20), nullable=True))
    jobs = sa.table('jobs', sa.column('preempt_kind', sa.String), sa.column('preempt_reason', sa.String))
    for kind in KINDS:
        prefix = f"{kind}: "
        op.execute(jobs.update().where(jobs.c.preempt_reason.like(f"{kind}:%"))
                   .values(preempt_kind=kind, preempt_reason=sa.func.substr(jobs.c.preempt_reason, len(prefix) + 1)))


def downgrade() -> None:
    jobs = sa.table('jobs', sa.column('preempt_kind', sa.String), sa.column('preempt_reason', sa.String))
    op.execute(jobs.update().where(jobs.c.preempt_kind.is_not(None))
               .values(preempt_reason=jobs.c.preempt_kind + ": " + sa.func.coalesce(jobs.c.preempt_reason, "")))
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('preempt_kind')
