//! Leases with fencing tokens (contract §9). The row of a name is kept after
//! release, so every new acquisition gets a larger token than any before.

use crate::args::Args;
use crate::conn::Conn;
use crate::error::Result;
use crate::out::Out;
use alkstore_core::time::now_ms;
use alkstore_core::NameKind;

/// `alk_lock_acquire(name, owner, ttl_s)` → token, or NULL when another owner holds it.
pub fn alk_lock_acquire(conn: &Conn, args: &Args) -> Result<Out> {
    let name = args.name(0, NameKind::Lock)?;
    let owner = args.name(1, NameKind::Owner)?;
    let ttl = args.ttl(2, "ttl_s")?;
    let now = conn.now_locked()?;
    let current = {
        let mut st = conn.stmt("lock_get")?;
        st.bind_text(1, name);
        if st.step_row()? {
            Some((st.opt_text(0).map(str::to_owned), st.i64(1), st.i64(2)))
        } else {
            None
        }
    };
    let token = match current {
        // Held and unexpired: the holder extends and keeps its token; others get NULL.
        Some((Some(holder), token, expires_at)) if expires_at > now => {
            if holder != owner {
                return Ok(Out::Null);
            }
            token
        }
        Some((_, token, _)) => token + 1,
        None => 1,
    };
    let mut st = conn.stmt("lock_put")?;
    st.bind_text(1, name);
    st.bind_text(2, owner);
    st.bind_i64(3, token);
    st.bind_i64(4, now + ttl);
    st.run()?;
    Ok(Out::Int(token))
}

/// `alk_lock_renew(name, owner, ttl_s)` → true if the owner's unexpired lease was extended.
pub fn alk_lock_renew(conn: &Conn, args: &Args) -> Result<Out> {
    let name = args.name(0, NameKind::Lock)?;
    let owner = args.name(1, NameKind::Owner)?;
    let ttl = args.ttl(2, "ttl_s")?;
    let now = conn.now_locked()?;
    let mut st = conn.stmt("lock_renew")?;
    st.bind_text(1, name);
    st.bind_text(2, owner);
    st.bind_i64(3, now);
    st.bind_i64(4, now + ttl);
    Ok(Out::Bool(st.step_row()?))
}

/// `alk_lock_release(name, owner)` → true if this owner held an unexpired lease.
pub fn alk_lock_release(conn: &Conn, args: &Args) -> Result<Out> {
    let name = args.name(0, NameKind::Lock)?;
    let owner = args.name(1, NameKind::Owner)?;
    let mut st = conn.stmt("lock_release")?;
    st.bind_text(1, name);
    st.bind_text(2, owner);
    st.bind_i64(3, now_ms());
    Ok(Out::Bool(st.step_row()?))
}
