//! A TCP listener whose connections can be cut from inside a handler.
//!
//! The `drop_after_commit_rate` fault must leave the client with a network error after the
//! server applied the change, with no response at all. Each accepted stream shares a kill flag
//! with the handler (through `ConnectInfo<ConnHandle>`); once it is set every read and write on
//! the stream fails, so hyper cannot send the response and closes the connection. A server-wide
//! flag does the same to all connections when the emulator shuts down.

use std::{
    io,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll},
};

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
};

pub struct KillableListener {
    inner: TcpListener,
    server_killed: Arc<AtomicBool>,
}

impl KillableListener {
    pub fn new(inner: TcpListener, server_killed: Arc<AtomicBool>) -> Self {
        Self {
            inner,
            server_killed,
        }
    }
}

/// Identifies one accepted connection to the handlers.
#[derive(Clone, Debug)]
pub struct ConnHandle {
    killed: Arc<AtomicBool>,
}

impl ConnHandle {
    /// Makes every further read and write on this connection fail.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
    }
}

impl Connected<IncomingStream<'_, KillableListener>> for ConnHandle {
    fn connect_info(stream: IncomingStream<'_, KillableListener>) -> Self {
        stream.remote_addr().clone()
    }
}

impl Listener for KillableListener {
    type Io = KillableStream;
    type Addr = ConnHandle;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok((stream, _remote)) => {
                    // Small JSON responses: do not let Nagle hold them back.
                    let _ = stream.set_nodelay(true);
                    let killed = Arc::new(AtomicBool::new(false));
                    let io = KillableStream {
                        inner: stream,
                        killed: Arc::clone(&killed),
                        server_killed: Arc::clone(&self.server_killed),
                    };
                    return (io, ConnHandle { killed });
                }
                Err(err) => {
                    tracing::warn!(error = %err, "emulator failed to accept a connection");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()?;
        Ok(ConnHandle {
            killed: Arc::new(AtomicBool::new(false)),
        })
    }
}

pub struct KillableStream {
    inner: TcpStream,
    killed: Arc<AtomicBool>,
    server_killed: Arc<AtomicBool>,
}

impl KillableStream {
    fn check(&self) -> io::Result<()> {
        if self.killed.load(Ordering::SeqCst) || self.server_killed.load(Ordering::SeqCst) {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "connection dropped by the emulator",
            ));
        }
        Ok(())
    }
}

impl AsyncRead for KillableStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.check()?;
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for KillableStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.check()?;
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.check()?;
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.check()?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
