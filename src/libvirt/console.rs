//! `shiftlab console`: a domain's serial console over a libvirt stream
//! (virDomainOpenConsole), so a remote libvirt works as a local one. The terminal
//! is put in raw mode while attached; the escape key, as in `virsh console`, is
//! Ctrl-] (libvirt tools/virsh-console.c, `virshConsoleEscapeChar`).

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use virt::stream::Stream;

use super::Host;

/// Ctrl-] (0x1d), the byte that ends the session.
pub const ESCAPE: u8 = 0x1d;
/// How the escape key is shown to the user.
pub const ESCAPE_NAME: &str = "Ctrl-]";

/// The part of `input` to pass to the console, and whether the escape key was in it
/// (everything from it on is dropped).
pub fn split_escape(input: &[u8]) -> (&[u8], bool) {
    match input.iter().position(|&b| b == ESCAPE) {
        Some(i) => (&input[..i], true),
        None => (input, false),
    }
}

/// The terminal's settings, put back when dropped.
struct RawTerminal {
    fd: i32,
    saved: libc::termios,
}

impl RawTerminal {
    /// Raw mode on `fd` when it is a terminal; `None` for a pipe or file.
    fn enter(fd: i32) -> Result<Option<RawTerminal>> {
        // SAFETY: isatty/tcgetattr/tcsetattr on a descriptor we own for the process'
        // lifetime, with a zeroed termios as the out-parameter.
        unsafe {
            if libc::isatty(fd) != 1 {
                return Ok(None);
            }
            let mut saved: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(fd, &mut saved) != 0 {
                return Err(std::io::Error::last_os_error()).context("reading the terminal's mode");
            }
            let mut raw = saved;
            libc::cfmakeraw(&mut raw);
            if libc::tcsetattr(fd, libc::TCSAFLUSH, &raw) != 0 {
                return Err(std::io::Error::last_os_error()).context("setting the terminal raw");
            }
            Ok(Some(RawTerminal { fd, saved }))
        }
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        // SAFETY: restores the settings read in `enter` on the same descriptor.
        unsafe {
            libc::tcsetattr(self.fd, libc::TCSAFLUSH, &self.saved);
        }
    }
}

/// The stream's pointer, for the thread that blocks in virStreamRecv while the
/// main thread sends: libvirt's objects are safe to use from several threads
/// (libvirt docs/threadsafety.rst).
struct StreamPtr(virt::sys::virStreamPtr);
// SAFETY: see above; the thread holds its own reference to the stream.
unsafe impl Send for StreamPtr {}

/// Attach the terminal to `domain`'s console until the escape key, the end of
/// input, or the console closing (the domain stopped). `force` takes it from
/// another client.
pub fn attach(host: &Host, domain: &str, force: bool) -> Result<()> {
    let Some(dom) = host.domain(domain)? else {
        bail!("no domain {domain} on {}", host.uri);
    };
    if !dom.is_active().context("reading the domain's state")? {
        bail!("{domain} is not running: its console has nothing to show (shiftlab start, or virsh start {domain})");
    }
    let stream = Stream::new(&host.conn, 0).context("opening a console stream")?;
    let mut flags = virt::sys::VIR_DOMAIN_CONSOLE_SAFE;
    if force {
        flags |= virt::sys::VIR_DOMAIN_CONSOLE_FORCE;
    }
    dom.open_console(None, &stream, flags).with_context(|| {
        format!("opening {domain}'s console (held by another client? --force takes it)")
    })?;
    eprintln!("connected to {domain}'s console; {ESCAPE_NAME} leaves\r");

    let (done_tx, done_rx) = mpsc::channel::<()>();
    // SAFETY: the thread holds its own reference (virStreamRef), released when it ends.
    let ptr = StreamPtr(unsafe {
        let p = stream.as_ptr();
        virt::sys::virStreamRef(p);
        p
    });
    let reader = std::thread::spawn(move || {
        let ptr = ptr;
        let mut buf = vec![0u8; 16 * 1024];
        let mut out = std::io::stdout().lock();
        loop {
            // SAFETY: a live stream and a buffer of the length given.
            let n = unsafe {
                virt::sys::virStreamRecv(ptr.0, buf.as_mut_ptr() as *mut libc::c_char, buf.len())
            };
            if n <= 0 {
                break;
            }
            if out
                .write_all(&buf[..n as usize])
                .and_then(|_| out.flush())
                .is_err()
            {
                break;
            }
        }
        // SAFETY: the reference taken above.
        unsafe { virt::sys::virStreamFree(ptr.0) };
        let _ = done_tx.send(());
    });

    let stdin = std::io::stdin();
    let raw = RawTerminal::enter(stdin.as_raw_fd())?;
    let result = pump_input(&stream, &done_rx, stdin.as_raw_fd());
    drop(raw);
    let closed = matches!(result, Ok(true)) || done_rx.try_recv().is_ok();
    let _ = stream.abort();
    if closed {
        let _ = reader.join();
        eprintln!("\n{domain}'s console closed");
    } else {
        // The reader is blocked in libvirt until the aborted stream wakes it; wait
        // briefly, the process ends right after anyway.
        let _ = done_rx.recv_timeout(Duration::from_secs(2));
        eprintln!();
    }
    result.map(|_| ())
}

/// Send the user's keys until the escape key, the end of input (then a second for
/// the last output), or the console closing (then `true`).
fn pump_input(stream: &Stream, done: &mpsc::Receiver<()>, fd: i32) -> Result<bool> {
    let mut stdin = std::io::stdin().lock();
    let mut buf = [0u8; 4096];
    loop {
        if done.try_recv().is_ok() {
            return Ok(true);
        }
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, 200) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e).context("waiting for input");
        }
        if r == 0 {
            continue;
        }
        let n = stdin.read(&mut buf).context("reading input")?;
        if n == 0 {
            std::thread::sleep(Duration::from_secs(1));
            return Ok(false);
        }
        let (data, escaped) = split_escape(&buf[..n]);
        let mut off = 0;
        while off < data.len() {
            let sent = stream
                .send(&data[off..])
                .context("sending to the console")?;
            if sent <= 0 {
                bail!("the console accepted no data");
            }
            off += sent as usize;
        }
        if escaped {
            return Ok(false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_escape_key_ends_the_input_there() {
        assert_eq!(split_escape(b"ls\r"), (&b"ls\r"[..], false));
        assert_eq!(split_escape(b"ab\x1dcd"), (&b"ab"[..], true));
        assert_eq!(split_escape(b"\x1d"), (&b""[..], true));
    }
}
