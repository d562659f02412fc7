//! A recording TCP proxy: what a client sends, seen from the wire.

/// A loopback proxy that records, for every request it forwards, its request
/// line and body length: what a client sends, seen from the wire.
pub struct Recorder {
    pub url: String,
    pub seen: std::sync::Arc<std::sync::Mutex<Vec<(String, usize)>>>,
}

impl Recorder {
    pub fn start(target: &str) -> Recorder {
        use std::io::{Read, Write};
        use std::net::{TcpListener, TcpStream};
        let target = target.trim_start_matches("http://").trim_end_matches('/').to_string();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = std::sync::Arc::clone(&seen);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(mut client) = client else { return };
                let Ok(mut server) = TcpStream::connect(&target) else { return };
                let (mut client_r, mut server_w) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let log = std::sync::Arc::clone(&log);
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    let mut chunk = [0_u8; 16 * 1024];
                    while let Ok(n) = client_r.read(&mut chunk) {
                        if n == 0 || server_w.write_all(&chunk[..n]).is_err() {
                            break;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        // Every complete request in the buffer: line and body length.
                        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&buf[..end]).to_string();
                            let len = head
                                .lines()
                                .find_map(|l| {
                                    let (k, v) = l.split_once(':')?;
                                    k.eq_ignore_ascii_case("content-length").then(|| v.trim().parse().ok())?
                                })
                                .unwrap_or(0);
                            if buf.len() < end + 4 + len {
                                break;
                            }
                            let line = head.lines().next().unwrap_or_default().to_string();
                            log.lock().unwrap().push((line, len));
                            buf.drain(..end + 4 + len);
                        }
                    }
                    let _ = server_w.shutdown(std::net::Shutdown::Write);
                });
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut server, &mut client);
                    let _ = client.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        Recorder { url, seen }
    }
}
