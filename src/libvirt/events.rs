//! libvirt's domain lifecycle events and connection close notices, for callers
//! that keep libvirt state in memory (the Redfish BMC's cache).
//!
//! libvirt delivers events only to a process that registered an event loop
//! implementation *before* opening its connections, and only while something
//! runs that loop: [`ensure_loop`] registers libvirt's default implementation
//! (`virEventRegisterDefaultImpl`) once per process and runs
//! `virEventRunDefaultImpl` on a dedicated thread (it blocks in `poll(2)`
//! until a file descriptor or timer is ready; no busy polling). With a loop
//! registered, the remote driver also turns on keepalive, so a dead daemon is
//! noticed and reported through the close callback
//! (libvirt `src/remote/remote_driver.c`, `remoteConnectOpen` → `virConnectSetKeepAlive`;
//! the API contract is in `include/libvirt/libvirt-event.h` and
//! `libvirt-domain.h`, `virConnectDomainEventRegisterAny`).

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::{Arc, OnceLock};

use anyhow::{bail, Result};
use virt::connect::Connect;
use virt::sys;

/// What happened to a domain, as far as a cache of its state cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The domain now runs (`VIR_DOMAIN_EVENT_STARTED`).
    Started,
    /// The domain no longer runs (`VIR_DOMAIN_EVENT_STOPPED`).
    Stopped,
    /// The definition was (re)defined (`VIR_DOMAIN_EVENT_DEFINED`, also what
    /// `virsh edit` produces).
    Defined,
    /// The definition is gone (`VIR_DOMAIN_EVENT_UNDEFINED`).
    Undefined,
    /// Anything else (suspend, resume, guest shutdown request, crash, ...):
    /// the state must be read again.
    Other,
    /// The running domain was reset (a guest reboot, QEMU's system_reset):
    /// `VIR_DOMAIN_EVENT_ID_REBOOT`. It keeps running, with its live definition.
    Reset,
}

impl Change {
    fn from_event(event: c_int) -> Change {
        match event as sys::virDomainEventType {
            sys::VIR_DOMAIN_EVENT_STARTED => Change::Started,
            sys::VIR_DOMAIN_EVENT_STOPPED => Change::Stopped,
            sys::VIR_DOMAIN_EVENT_DEFINED => Change::Defined,
            sys::VIR_DOMAIN_EVENT_UNDEFINED => Change::Undefined,
            _ => Change::Other,
        }
    }
}

/// What a subscriber hears: a domain (by lower-case UUID) changed, or the
/// connection closed (no further events will come on it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    Domain { uuid: String, change: Change },
    Closed,
}

type Sink = Arc<dyn Fn(Notice) + Send + Sync>;

static LOOP: OnceLock<Result<(), String>> = OnceLock::new();

/// Registers libvirt's default event loop and runs it on a thread, once per
/// process. Call before opening a connection whose events you want.
pub fn ensure_loop() -> Result<()> {
    let r = LOOP.get_or_init(|| {
        // SAFETY: plain libvirt calls without pointers; called once.
        if unsafe { sys::virEventRegisterDefaultImpl() } < 0 {
            return Err("registering libvirt's event loop".into());
        }
        std::thread::Builder::new()
            .name("libvirt-events".into())
            .spawn(|| loop {
                // SAFETY: the default implementation was registered above.
                if unsafe { sys::virEventRunDefaultImpl() } < 0 {
                    tracing::warn!(
                        error = %virt::error::Error::last_error(),
                        "libvirt event loop iteration failed"
                    );
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
            })
            .map(|_| ())
            .map_err(|e| format!("starting the libvirt event thread: {e}"))
    });
    match r {
        Ok(()) => Ok(()),
        Err(e) => bail!("{e}"),
    }
}

/// A live registration: domain lifecycle events of every domain on the
/// connection, and the connection's close notice. Deregistered on drop.
pub struct Subscription {
    conn: Connect,
    callback_id: c_int,
    reboot_id: Option<c_int>,
    close_registered: bool,
}

/// The domain's lower-case UUID, from a callback's domain pointer.
///
/// # Safety
/// `dom` must be valid for the call.
unsafe fn uuid_of(dom: sys::virDomainPtr) -> Option<String> {
    let mut buf = [0 as c_char; sys::VIR_UUID_STRING_BUFLEN as usize];
    // SAFETY: dom is valid (caller); buf has libvirt's length.
    if unsafe { sys::virDomainGetUUIDString(dom, buf.as_mut_ptr()) } < 0 {
        return None;
    }
    // SAFETY: libvirt wrote a NUL-terminated string into buf.
    Some(
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .to_ascii_lowercase(),
    )
}

/// `virConnectDomainEventGenericCallback`: (conn, dom, opaque) — the shape of
/// the REBOOT event's callback (libvirt-domain.h).
unsafe extern "C" fn reboot_cb(
    _conn: sys::virConnectPtr,
    dom: sys::virDomainPtr,
    opaque: *mut c_void,
) {
    // SAFETY: opaque is the Box<Sink> registered in subscribe, alive until free_sink.
    let sink = unsafe { &*(opaque as *const Sink) };
    // SAFETY: dom is valid for the callback's duration.
    let Some(uuid) = (unsafe { uuid_of(dom) }) else {
        return;
    };
    tracing::debug!(%uuid, "libvirt domain reset");
    let s = sink.clone();
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        s(Notice::Domain {
            uuid,
            change: Change::Reset,
        })
    }));
}

unsafe extern "C" fn lifecycle_cb(
    _conn: sys::virConnectPtr,
    dom: sys::virDomainPtr,
    event: c_int,
    _detail: c_int,
    opaque: *mut c_void,
) -> c_int {
    // SAFETY: opaque is the Box<Sink> registered below, alive until free_sink.
    let sink = unsafe { &*(opaque as *const Sink) };
    let mut buf = [0 as c_char; sys::VIR_UUID_STRING_BUFLEN as usize];
    // SAFETY: dom is valid for the callback's duration; buf has libvirt's length.
    if unsafe { sys::virDomainGetUUIDString(dom, buf.as_mut_ptr()) } < 0 {
        return 0;
    }
    // SAFETY: libvirt wrote a NUL-terminated string into buf.
    let uuid = unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .to_ascii_lowercase();
    let change = Change::from_event(event);
    tracing::debug!(%uuid, ?change, "libvirt domain event");
    let s = sink.clone();
    // a panic must not unwind into libvirt
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        s(Notice::Domain { uuid, change })
    }));
    0
}

unsafe extern "C" fn close_cb(_conn: sys::virConnectPtr, reason: c_int, opaque: *mut c_void) {
    // SAFETY: as in lifecycle_cb.
    let sink = unsafe { &*(opaque as *const Sink) };
    tracing::warn!(reason, "libvirt connection closed");
    let s = sink.clone();
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s(Notice::Closed)));
}

unsafe extern "C" fn free_sink(opaque: *mut c_void) {
    // SAFETY: opaque came from Box::into_raw(Box<Sink>) and libvirt frees it once.
    drop(unsafe { Box::from_raw(opaque as *mut Sink) });
}

/// Subscribes `sink` to every domain's lifecycle events on `conn` and to
/// its close notice. [`ensure_loop`] must have run before `conn` was opened.
pub fn subscribe(
    conn: &Connect,
    sink: impl Fn(Notice) + Send + Sync + 'static,
) -> Result<Subscription> {
    ensure_loop()?;
    let sink: Sink = Arc::new(sink);
    let opaque = Box::into_raw(Box::new(sink.clone())) as *mut c_void;
    // libvirt's VIR_DOMAIN_EVENT_CALLBACK(): the generic pointer type carries
    // the lifecycle callback's real signature.
    // SAFETY: the two function pointer types differ only in arguments libvirt
    // passes according to the event ID.
    let cb: sys::virConnectDomainEventGenericCallback = unsafe {
        std::mem::transmute::<
            Option<
                unsafe extern "C" fn(
                    sys::virConnectPtr,
                    sys::virDomainPtr,
                    c_int,
                    c_int,
                    *mut c_void,
                ) -> c_int,
            >,
            sys::virConnectDomainEventGenericCallback,
        >(Some(lifecycle_cb))
    };
    // SAFETY: conn is open; opaque stays valid until libvirt calls free_sink.
    let callback_id = unsafe {
        sys::virConnectDomainEventRegisterAny(
            conn.as_ptr(),
            std::ptr::null_mut(),
            sys::VIR_DOMAIN_EVENT_ID_LIFECYCLE as c_int,
            cb,
            opaque,
            Some(free_sink),
        )
    };
    if callback_id < 0 {
        // SAFETY: libvirt did not take ownership on failure.
        drop(unsafe { Box::from_raw(opaque as *mut Sink) });
        bail!(
            "registering for libvirt domain events: {}",
            virt::error::Error::last_error()
        );
    }
    let reboot_opaque = Box::into_raw(Box::new(sink.clone())) as *mut c_void;
    // SAFETY: conn is open; reboot_opaque stays valid until libvirt calls free_sink.
    let reboot_id = unsafe {
        sys::virConnectDomainEventRegisterAny(
            conn.as_ptr(),
            std::ptr::null_mut(),
            sys::VIR_DOMAIN_EVENT_ID_REBOOT as c_int,
            Some(reboot_cb),
            reboot_opaque,
            Some(free_sink),
        )
    };
    let reboot_id = if reboot_id < 0 {
        // SAFETY: libvirt did not take ownership on failure.
        drop(unsafe { Box::from_raw(reboot_opaque as *mut Sink) });
        None
    } else {
        Some(reboot_id)
    };
    let close_opaque = Box::into_raw(Box::new(sink)) as *mut c_void;
    // SAFETY: as above.
    let close_registered = unsafe {
        sys::virConnectRegisterCloseCallback(
            conn.as_ptr(),
            Some(close_cb),
            close_opaque,
            Some(free_sink),
        )
    } >= 0;
    if !close_registered {
        // SAFETY: not taken by libvirt (drivers without close notices, e.g. test:///).
        drop(unsafe { Box::from_raw(close_opaque as *mut Sink) });
    }
    Ok(Subscription {
        conn: conn.clone(),
        callback_id,
        reboot_id,
        close_registered,
    })
}

impl Drop for Subscription {
    fn drop(&mut self) {
        // SAFETY: the id and callback were registered on this connection.
        unsafe {
            sys::virConnectDomainEventDeregisterAny(self.conn.as_ptr(), self.callback_id);
            if let Some(id) = self.reboot_id {
                sys::virConnectDomainEventDeregisterAny(self.conn.as_ptr(), id);
            }
            if self.close_registered {
                sys::virConnectUnregisterCloseCallback(self.conn.as_ptr(), Some(close_cb));
            }
        }
    }
}

/// Is the connection still usable (keepalive has not declared it dead)?
pub fn is_alive(conn: &Connect) -> bool {
    // SAFETY: conn is open.
    unsafe { sys::virConnectIsAlive(conn.as_ptr()) == 1 }
}
