//! Scripted input for tests and demos: `--script "wait 2s; key D; scrub 10; wait 1s;
//! screenshot out.png; quit"` (or a file of such lines). Keys go through the same mapping
//! as the keyboard ([`key_action`]), so a script exercises the real event handling.
//!
//! Commands (separated by `;` or new lines, `#` starts a comment):
//! - `wait 2s` / `wait 250ms` — let the player run;
//! - `wait-frames N` — until N more frames have been shown;
//! - `wait-shown N` — until frame N is on screen (scrubs and steps land exactly);
//! - `key NAME` — a key press: `Space`, `Left`, `Right`, `Home`, `End`, `Escape`, or a letter
//!   (letters are the lowercase keys, except `S`, Shift+S);
//! - `scrub N` — jump to frame N (as releasing the slider there does);
//! - `drag N` / `release N` — the timeline slider dragged to N (nearby frames show as they
//!   arrive) and released at N (the exact frame follows);
//! - `path direct|host` — choose a path (as the overlay's switch does);
//! - `screenshot FILE` — the composed window (image and overlay) as PNG;
//! - `render FILE` — the renderer's image alone as PNG;
//! - `dump-state FILE` — the overlay's state as JSON;
//! - `colormap N NAME` — attribute slot N (from 1, as the keys 1–8) gets colormap NAME, as
//!   the transfer panel's list gives it;
//! - `save-scene [FILE]` — the looks and camera written as a scene, as Shift+S does (to FILE,
//!   else back into the scene played or a new file beside the dataset);
//! - `quit`.

use std::path::PathBuf;
use std::time::Duration;

use crate::pipeline::Direction;

/// What a key (or a script's `key`) does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Space.
    TogglePlay,
    /// ← / →.
    Step(Direction),
    /// D: direct paths on/off.
    ToggleDirect,
    /// F.
    ToggleFullscreen,
    /// H.
    ToggleHelp,
    /// R.
    Reverse,
    /// L: loop → ping-pong → once.
    CycleMode,
    /// Home.
    First,
    /// End.
    Last,
    /// Esc.
    Quit,
    /// P: plots on/off.
    TogglePlots,
    /// V: compact or full figures.
    ToggleCompact,
    /// B: large print on/off.
    ToggleLargePrint,
    /// C: reset the camera.
    ResetCamera,
    /// 1–8: attribute on/off.
    ToggleAttribute(usize),
    /// T: next transfer-function preset for the first attribute.
    NextPreset,
    /// W/A/S/X: orbit; + / −: zoom (keyboard camera).
    Orbit(i8, i8),
    /// Zoom in (+1) or out (−1).
    Zoom(i8),
    /// M: path tracing on/off (the scene's render mode otherwise).
    TogglePathTracing,
    /// N: the path tracer's denoiser on/off (the picture shows the raw mean when off).
    ToggleDenoise,
    /// E: the transfer-function panel on/off.
    ToggleTransferPanel,
    /// Shift+S: the looks and camera written as a scene file.
    SaveScene,
}

/// The action of a key by name (winit's logical key names or single characters), if any.
pub fn key_action(name: &str) -> Option<Action> {
    let n = name.trim();
    // Shift+S arrives as the character "S"; every other letter means its key either case.
    if n == "S" {
        return Some(Action::SaveScene);
    }
    Some(match n.to_ascii_lowercase().as_str() {
        "space" | " " => Action::TogglePlay,
        "left" | "arrowleft" => Action::Step(Direction::Reverse),
        "right" | "arrowright" => Action::Step(Direction::Forward),
        "d" => Action::ToggleDirect,
        "f" => Action::ToggleFullscreen,
        "h" => Action::ToggleHelp,
        "r" => Action::Reverse,
        "l" => Action::CycleMode,
        "home" => Action::First,
        "end" => Action::Last,
        "esc" | "escape" | "q" => Action::Quit,
        "p" => Action::TogglePlots,
        "v" => Action::ToggleCompact,
        "b" => Action::ToggleLargePrint,
        "c" => Action::ResetCamera,
        "t" => Action::NextPreset,
        "m" => Action::TogglePathTracing,
        "n" => Action::ToggleDenoise,
        "e" => Action::ToggleTransferPanel,
        "1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" => {
            Action::ToggleAttribute(n.parse::<usize>().ok()? - 1)
        }
        "a" => Action::Orbit(-1, 0),
        "w" => Action::Orbit(0, 1),
        "s" => Action::Orbit(0, -1),
        "x" => Action::Orbit(1, 0),
        "+" | "=" => Action::Zoom(1),
        "-" => Action::Zoom(-1),
        _ => return None,
    })
}

/// One script command.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// Let time pass.
    Wait(Duration),
    /// Until this many more frames have been shown.
    WaitFrames(u64),
    /// Until this frame is on screen.
    WaitShown(u32),
    /// A key press.
    Key(Action),
    /// Jump to a frame.
    Scrub(u32),
    /// Slider dragged to a frame.
    Drag(u32),
    /// Slider released at a frame.
    Release(u32),
    /// Choose a path.
    Path(super::PathSel),
    /// Save the composed window.
    Screenshot(PathBuf),
    /// Save the renderer's image.
    Render(PathBuf),
    /// Save the overlay state as JSON.
    DumpState(PathBuf),
    /// Give an attribute slot (from 0) a colormap by name.
    Colormap(usize, String),
    /// Save the looks and camera as a scene (None: where Shift+S writes).
    SaveScene(Option<PathBuf>),
    /// Quit.
    Quit,
}

/// Parses a duration as every flag does ([`crate::units::parse_duration`]): `2s`, `1.5s`,
/// `250ms`, `5min`, `2h`, or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::units::parse_duration(s).map_err(|e| e.to_string())
}

/// Parses a script: the text itself, or the path of a file holding it.
pub fn parse(text_or_path: &str) -> Result<Vec<Command>, String> {
    let p = std::path::Path::new(text_or_path);
    let text = if !text_or_path.contains(';') && p.is_file() {
        std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?
    } else {
        text_or_path.to_string()
    };
    let mut out = Vec::new();
    for (i, raw) in text.split([';', '\n']).enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (cmd, arg) = line
            .split_once(char::is_whitespace)
            .map_or((line, ""), |(c, a)| (c, a.trim()));
        let err = |m: String| format!("script command {} ({line:?}): {m}", i + 1);
        let need = |what: &str| {
            if arg.is_empty() {
                Err(err(format!("needs {what}")))
            } else {
                Ok(arg)
            }
        };
        let frame = |a: &str| {
            a.parse::<u32>()
                .map_err(|_| err(format!("{a:?} is not a frame number")))
        };
        out.push(match cmd.to_ascii_lowercase().as_str() {
            "wait" => Command::Wait(parse_duration(need("a duration")?).map_err(err)?),
            "wait-frames" => Command::WaitFrames(
                need("a count")?
                    .parse()
                    .map_err(|_| err("not a count".into()))?,
            ),
            "wait-shown" => Command::WaitShown(frame(need("a frame")?)?),
            "key" => Command::Key(
                key_action(need("a key name")?)
                    .ok_or_else(|| err(format!("unknown key {arg:?}")))?,
            ),
            "scrub" => Command::Scrub(frame(need("a frame")?)?),
            "drag" => Command::Drag(frame(need("a frame")?)?),
            "release" => Command::Release(frame(need("a frame")?)?),
            "path" => Command::Path(match need("direct or host")? {
                "direct" => super::PathSel::Direct,
                "host" => super::PathSel::Host,
                other => return Err(err(format!("unknown path {other:?} (direct or host)"))),
            }),
            "screenshot" => Command::Screenshot(need("a file")?.into()),
            "render" => Command::Render(need("a file")?.into()),
            "dump-state" => Command::DumpState(need("a file")?.into()),
            "colormap" => {
                let (n, name) = need("a slot and a colormap name")?
                    .split_once(char::is_whitespace)
                    .ok_or_else(|| err("needs a slot and a colormap name".into()))?;
                match n.parse::<usize>() {
                    Ok(n @ 1..) => Command::Colormap(n - 1, name.trim().to_string()),
                    _ => return Err(err(format!("{n:?} is not a slot (1, 2, ...)"))),
                }
            }
            "save-scene" => Command::SaveScene((!arg.is_empty()).then(|| arg.into())),
            "quit" | "exit" => Command::Quit,
            other => return Err(err(format!("unknown command {other:?}"))),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_example() {
        let c = parse("wait 2s; key D; scrub 10; wait 250ms; screenshot out.png; quit").unwrap();
        assert_eq!(
            c,
            vec![
                Command::Wait(Duration::from_secs(2)),
                Command::Key(Action::ToggleDirect),
                Command::Scrub(10),
                Command::Wait(Duration::from_millis(250)),
                Command::Screenshot("out.png".into()),
                Command::Quit
            ]
        );
        assert!(parse("key Q7").is_err());
        assert!(parse("wait forever").is_err());
        assert!(parse("scrub -1").is_err());
        assert!(parse("bogus").is_err());
        assert_eq!(
            parse("key S; key s; key e; colormap 2 turbo; save-scene; save-scene a b.toml")
                .unwrap(),
            vec![
                Command::Key(Action::SaveScene),
                Command::Key(Action::Orbit(0, -1)),
                Command::Key(Action::ToggleTransferPanel),
                Command::Colormap(1, "turbo".into()),
                Command::SaveScene(None),
                Command::SaveScene(Some("a b.toml".into())),
            ]
        );
        assert!(parse("colormap 0 turbo").is_err());
        assert!(parse("colormap 1").is_err());
        assert_eq!(parse_duration("20s").unwrap(), Duration::from_secs(20));
        assert!(parse_duration("nan").is_err());
    }
}
