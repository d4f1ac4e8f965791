//! What the database role the dashboard connects as may not do, said once
//! up front (on every page, and by `alkstore web` when it starts) rather
//! than only by the 403s of the pages it cannot show.

use crate::db::Db;

const PG_ROLES: &str = "SELECT current_user::text, \
     pg_has_role(current_user, 'alkstore_admin', 'MEMBER'), \
     pg_has_role(current_user, 'alkstore_user', 'MEMBER')";

/// `None` when the role may do everything the dashboard does (SQLite has
/// no roles); otherwise a sentence saying what it cannot do.
pub fn note(db: &Db) -> Option<String> {
    let Db::Postgres(pg) = db else { return None };
    let mut tx = pg.transaction().ok()?;
    let row = tx.client().query_one(PG_ROLES, &[]).ok()?;
    let _ = tx.rollback();
    let (role, admin, user): (String, bool, bool) = (row.get(0), row.get(1), row.get(2));
    match (admin, user) {
        (true, _) => None,
        (false, true) => Some(format!(
            "Connected as role {role}, a member of alkstore_user but not of alkstore_admin: \
             the listings, counts and every change are refused; only single jobs by id can be read. \
             Connect as a member of alkstore_admin."
        )),
        (false, false) => Some(format!(
            "Connected as role {role}, a member of neither alkstore_admin nor alkstore_user: \
             every page is refused. Connect as a member of alkstore_admin."
        )),
    }
}
