//! The exits of an allowlisted network namespace: listening sockets the view builder opens
//! inside the namespace and sends to clawsmith over a socket pair (`SCM_RIGHTS`), where the
//! egress gateway serves them (`crate::egress`).

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use super::check;
use crate::egress::{DNS_PORT, PROXY_PORT, TRANSPARENT_MAX};

/// How many descriptors one message carries at most: the proxy, the DNS socket and the
/// transparent listeners.
const EXITS_MAX: usize = 2 + TRANSPARENT_MAX;

/// Room for one `SCM_RIGHTS` control message of [`EXITS_MAX`] descriptors, aligned for
/// `cmsghdr`.
#[repr(C, align(8))]
struct ControlBuffer([u8; 256]);

/// A connected pair of `SOCK_SEQPACKET` sockets: (clawsmith's end, the builder's end).
pub(crate) fn socket_pair() -> io::Result<(RawFd, RawFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: socketpair(2) writes two descriptors into the owned array.
    check(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    Ok((fds[0], fds[1]))
}

/// A socket of `kind` bound to `address:port` (and listening, for a stream socket).
fn bound(kind: libc::c_int, address: [u8; 4], port: u16) -> io::Result<RawFd> {
    // SAFETY: socket(2) with integer arguments only.
    let socket = check(unsafe { libc::socket(libc::AF_INET, kind | libc::SOCK_CLOEXEC, 0) })?;
    let result = (|| {
        let on: libc::c_int = 1;
        // SAFETY: setsockopt(2) reading a local integer of the size given.
        check(unsafe {
            libc::setsockopt(
                socket,
                libc::SOL_SOCKET,
                libc::SO_REUSEADDR,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        })?;
        // SAFETY: `sockaddr_in` is plain data, valid zeroed.
        let mut name: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        name.sin_family = libc::AF_INET as libc::sa_family_t;
        name.sin_port = port.to_be();
        name.sin_addr.s_addr = u32::from_ne_bytes(address);
        // SAFETY: bind(2) reading the local address of the size given.
        check(unsafe {
            libc::bind(
                socket,
                (&name as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        })?;
        if kind == libc::SOCK_STREAM {
            // SAFETY: listen(2) on the socket just bound.
            check(unsafe { libc::listen(socket, 128) })?;
        }
        Ok(socket)
    })();
    if result.is_err() {
        // SAFETY: closing the socket this function opened.
        unsafe {
            libc::close(socket);
        }
    }
    result
}

/// Runs in the builder, inside the new network namespace: opens the proxy listener, the DNS
/// socket and a transparent listener on each of `ports`, and sends them over `pair` with the
/// errno of the first failure (0: all opened; then no descriptor is sent). Only system calls
/// over stack data: the builder is a fork of a threaded process.
pub(crate) fn open_and_send(ports: &[u16], pair: RawFd) {
    let mut fds: [RawFd; EXITS_MAX] = [-1; EXITS_MAX];
    let mut count = 0;
    let mut opened = || -> io::Result<()> {
        fds[0] = bound(libc::SOCK_STREAM, [127, 0, 0, 1], PROXY_PORT)?;
        count = 1;
        fds[1] = bound(libc::SOCK_DGRAM, [127, 0, 0, 1], DNS_PORT)?;
        count = 2;
        for port in ports.iter().take(TRANSPARENT_MAX) {
            fds[count] = bound(libc::SOCK_STREAM, [0, 0, 0, 0], *port)?;
            count += 1;
        }
        Ok(())
    };
    let errno: i32 = match opened() {
        Ok(()) => 0,
        Err(error) => error.raw_os_error().unwrap_or(libc::EIO),
    };
    let sent = if errno == 0 { count } else { 0 };
    send(pair, errno, &fds[..sent]);
    for fd in &fds[..count] {
        // SAFETY: closing descriptors this process opened (the receiver has its own copies).
        unsafe {
            libc::close(*fd);
        }
    }
}

/// Sends `errno` and `fds` as one message over `pair`.
fn send(pair: RawFd, errno: i32, fds: &[RawFd]) {
    let mut data = errno.to_ne_bytes();
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    let mut control = ControlBuffer([0; 256]);
    // SAFETY: `msghdr` is plain data, valid zeroed.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    if !fds.is_empty() {
        let bytes = std::mem::size_of_val(fds) as libc::c_uint;
        message.msg_control = control.0.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE is arithmetic on a length.
        message.msg_controllen = unsafe { libc::CMSG_SPACE(bytes) } as usize;
        // SAFETY: the control buffer is aligned and large enough for one header with
        // `EXITS_MAX` descriptors (checked by `control_buffer_holds_every_exit`); CMSG_FIRSTHDR
        // and CMSG_DATA point inside it.
        unsafe {
            let header = libc::CMSG_FIRSTHDR(&message);
            (*header).cmsg_level = libc::SOL_SOCKET;
            (*header).cmsg_type = libc::SCM_RIGHTS;
            (*header).cmsg_len = libc::CMSG_LEN(bytes) as usize;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr().cast::<u8>(),
                libc::CMSG_DATA(header),
                bytes as usize,
            );
        }
    }
    // SAFETY: sendmsg(2) of a message whose pointers lead to the local buffers above.
    unsafe {
        libc::sendmsg(pair, &message, libc::MSG_NOSIGNAL);
    }
}

/// Runs in clawsmith once the builder is ready: the exits it sent over `pair`, or the error
/// that kept it from opening them.
pub(crate) fn receive(pair: RawFd) -> io::Result<Vec<OwnedFd>> {
    let mut data = [0_u8; 4];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    let mut control = ControlBuffer([0; 256]);
    // SAFETY: `msghdr` is plain data, valid zeroed.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.0.as_mut_ptr().cast();
    message.msg_controllen = control.0.len();
    // SAFETY: recvmsg(2) into the local buffers the message points to.
    let read = check(unsafe {
        libc::recvmsg(
            pair,
            &mut message,
            libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
        ) as i32
    })?;
    let mut fds = Vec::new();
    // SAFETY: walking the control messages recvmsg just wrote into `control`, bounded by
    // `msg_controllen`; each SCM_RIGHTS payload is an array of descriptors now ours.
    unsafe {
        let mut header = libc::CMSG_FIRSTHDR(&message);
        while !header.is_null() {
            if (*header).cmsg_level == libc::SOL_SOCKET && (*header).cmsg_type == libc::SCM_RIGHTS {
                let bytes = (*header).cmsg_len - libc::CMSG_LEN(0) as usize;
                let count = bytes / std::mem::size_of::<RawFd>();
                let data = libc::CMSG_DATA(header).cast::<RawFd>();
                for index in 0..count {
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(
                        data.add(index),
                    )));
                }
            }
            header = libc::CMSG_NXTHDR(&message, header);
        }
    }
    if read != 4 {
        return Err(io::Error::other(
            "the view builder sent no word about the exits",
        ));
    }
    match i32::from_ne_bytes(data) {
        0 => Ok(fds),
        errno => Err(io::Error::from_raw_os_error(errno)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_buffer_holds_every_exit() {
        let bytes = (EXITS_MAX * std::mem::size_of::<RawFd>()) as libc::c_uint;
        // SAFETY: CMSG_SPACE is arithmetic on a length.
        let space = unsafe { libc::CMSG_SPACE(bytes) } as usize;
        assert!(space <= std::mem::size_of::<ControlBuffer>(), "{space}");
    }

    #[test]
    fn exits_cross_the_pair_with_their_errno() {
        let (ours, theirs) = socket_pair().unwrap();
        // Port 0: the kernel picks; here in the host's namespace, only to see them cross.
        let listener = bound(libc::SOCK_STREAM, [127, 0, 0, 1], 0).unwrap();
        send(theirs, 0, &[listener]);
        let received = receive(ours).unwrap();
        assert_eq!(received.len(), 1);
        let listener = std::net::TcpListener::from(received.into_iter().next().unwrap());
        assert!(listener.local_addr().unwrap().ip().is_loopback());
        send(theirs, libc::EADDRINUSE, &[]);
        let error = receive(ours).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::EADDRINUSE));
        // SAFETY: closing the descriptors this test opened.
        unsafe {
            libc::close(ours);
            libc::close(theirs);
        }
    }
}
