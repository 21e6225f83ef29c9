//! Scripted input for tests and demos: `--script "wait 2s; key D; scrub 10; wait 1s;
//! screenshot out.png; quit"` (or a file of such lines). Keys go through the same mapping
//! as the keyboard ([`key_action`]), so a script exercises the real event handling.
//!
//! Commands (separated by `;` or new lines, `#` starts a comment):
//! - `wait 2s` / `wait 250ms` — let the player run;
//! - `wait-frames N` — until N more frames have been shown;
//! - `wait-shown N` — until frame N is on screen (scrubs and steps land exactly);
//! - `key NAME` — a key press: `Space`, `Left`, `Right`, `Home`, `End`, `Escape`, or a letter
//!   (letters are the lowercase keys, except `S`, Shift+S, saving the scene, and `R`,
//!   Shift+R, recording);
//! - `scrub N` — jump to frame N (as releasing the slider there does);
//! - `drag N` / `release N` — the timeline slider dragged to N (nearby frames show as they
//!   arrive) and released at N (the exact frame follows);
//! - `path direct|host` — choose a path (as the overlay's switch does);
//! - `screenshot FILE` — the composed window (image and overlay) as PNG;
//! - `render FILE` — the renderer's image alone as PNG;
//! - `dump-state FILE` — the overlay's state as JSON;
//! - `record FILE.mp4` / `record stop` — record the window to a movie, as Shift+R does;
//! - `slice AXIS METRES [ATTRIBUTE]` / `slice off` — a slice plane across x, y or z at a
//!   world coordinate, showing an attribute (by name; the shown one otherwise);
//! - `probe X Y` — the probe at window pixel (X, Y), as the mouse with the probe on;
//! - `line X,Y,Z X,Y,Z [ATTRIBUTE]` — a line plot between two world points (metres);
//! - `pick X Y` — a line plot's end where the probe at window pixel (X, Y) lands, as
//!   Ctrl+click there;
//! - `colormap N NAME` — attribute slot N (from 1, as the keys 1–8) gets colormap NAME, as
//!   the transfer panel's list gives it;
//! - `save-scene [FILE]` — the looks and camera written as a scene, as Shift+S does (to FILE,
//!   else back into the scene played or a new file beside the dataset);
//! - `quit`.

use std::path::PathBuf;
use std::time::Duration;

use super::analysis::Axis;
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
    /// U: the clean view (every panel hidden but the legend) on/off.
    ToggleClean,
    /// Shift+R: record the window to a movie, or stop and finish it.
    ToggleRecord,
    /// E: the transfer-function panel on/off.
    ToggleTransferPanel,
    /// Shift+S: the looks and camera written as a scene file.
    SaveScene,
    /// Slices, the probe and the line plot.
    Analysis(AnalysisKey),
}

/// Keys of the analysis panels (`overlay::analysis`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnalysisKey {
    /// Z: a slice across x → y → z → none.
    CycleSliceAxis,
    /// [ / ]: the slice one voxel down / up; { / } (with Shift): ten.
    MoveSlice(i32),
    /// J: the next attribute on the slice and the line plot.
    NextAttribute,
    /// K: the slice's 2-D panel on/off.
    ToggleSlicePanel,
    /// I: the probe under the mouse on/off.
    ToggleProbe,
    /// Y: the line plot cleared (Ctrl+click picks its ends).
    ClearLine,
}

/// The action of a key by name (winit's logical key names or single characters), if any.
pub fn key_action(name: &str) -> Option<Action> {
    let n = name.trim();
    // Shift+R and Shift+S arrive as the characters "R" and "S"; every other letter means its
    // key either case.
    if n == "R" {
        return Some(Action::ToggleRecord);
    }
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
        "u" => Action::ToggleClean,
        "e" => Action::ToggleTransferPanel,
        "1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" => {
            Action::ToggleAttribute(n.parse::<usize>().ok()? - 1)
        }
        "a" => Action::Orbit(-1, 0),
        "w" => Action::Orbit(0, 1),
        "s" => Action::Orbit(0, -1),
        "x" => Action::Orbit(1, 0),
        "z" => Action::Analysis(AnalysisKey::CycleSliceAxis),
        "[" => Action::Analysis(AnalysisKey::MoveSlice(-1)),
        "]" => Action::Analysis(AnalysisKey::MoveSlice(1)),
        "{" => Action::Analysis(AnalysisKey::MoveSlice(-10)),
        "}" => Action::Analysis(AnalysisKey::MoveSlice(10)),
        "j" => Action::Analysis(AnalysisKey::NextAttribute),
        "k" => Action::Analysis(AnalysisKey::ToggleSlicePanel),
        "i" => Action::Analysis(AnalysisKey::ToggleProbe),
        "y" => Action::Analysis(AnalysisKey::ClearLine),
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
    /// Record the window to this movie; `None`: stop and finish it.
    Record(Option<PathBuf>),
    /// A slice plane (axis, world coordinate, attribute name), or none.
    Slice(Option<(Axis, f64, Option<String>)>),
    /// The probe at a window pixel.
    Probe([f32; 2]),
    /// A line plot's end picked at a window pixel.
    Pick([f32; 2]),
    /// A line plot between two world points, of an attribute (by name).
    Line([f64; 3], [f64; 3], Option<String>),
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
            "record" => Command::Record(match need("a file.mp4 or stop")? {
                "stop" => None,
                file => Some(file.into()),
            }),
            "slice" => parse_slice(need("an axis and a position, or off")?).map_err(err)?,
            "probe" => Command::Probe(numbers::<f32, 2>(need("X Y")?, ' ').map_err(err)?),
            "pick" => Command::Pick(numbers::<f32, 2>(need("X Y")?, ' ').map_err(err)?),
            "line" => parse_line(need("two points X,Y,Z")?).map_err(err)?,
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

/// `N` numbers separated by `sep` (and spaces).
fn numbers<T: std::str::FromStr + Copy + Default, const N: usize>(
    s: &str,
    sep: char,
) -> Result<[T; N], String> {
    let parts: Vec<&str> = s
        .split(sep)
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if parts.len() != N {
        return Err(format!("{s:?}: {N} numbers expected"));
    }
    let mut out = [T::default(); N];
    for (o, p) in out.iter_mut().zip(parts) {
        *o = p.parse().map_err(|_| format!("{p:?} is not a number"))?;
    }
    Ok(out)
}

/// `AXIS METRES [ATTRIBUTE]` or `off`.
fn parse_slice(arg: &str) -> Result<Command, String> {
    let words: Vec<&str> = arg.split_whitespace().collect();
    match words.as_slice() {
        ["off"] => Ok(Command::Slice(None)),
        [axis, at, rest @ ..] if rest.len() <= 1 => {
            let axis = Axis::parse(axis).ok_or_else(|| format!("{axis:?} is not x, y or z"))?;
            let at: f64 = at
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite())
                .ok_or_else(|| format!("{at:?} is not a position in metres"))?;
            Ok(Command::Slice(Some((
                axis,
                at,
                rest.first().map(|s| s.to_string()),
            ))))
        }
        _ => Err("slice AXIS METRES [ATTRIBUTE], or slice off".into()),
    }
}

/// `X,Y,Z X,Y,Z [ATTRIBUTE]`.
fn parse_line(arg: &str) -> Result<Command, String> {
    let words: Vec<&str> = arg.split_whitespace().collect();
    let (a, b, name) = match words.as_slice() {
        [a, b] => (a, b, None),
        [a, b, n] => (a, b, Some(n.to_string())),
        _ => return Err("line X,Y,Z X,Y,Z [ATTRIBUTE]".into()),
    };
    let finite = |p: [f64; 3]| {
        if p.iter().all(|c| c.is_finite()) {
            Ok(p)
        } else {
            Err(format!("{p:?} is not a finite point"))
        }
    };
    Ok(Command::Line(
        finite(numbers(a, ',')?)?,
        finite(numbers(b, ',')?)?,
        name,
    ))
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
        // Shift+R records; a lowercase r still reverses.
        assert_eq!(key_action("R"), Some(Action::ToggleRecord));
        assert_eq!(key_action("r"), Some(Action::Reverse));
        assert_eq!(key_action("u"), Some(Action::ToggleClean));
        assert_eq!(
            parse("record a.mp4; record stop").unwrap(),
            vec![Command::Record(Some("a.mp4".into())), Command::Record(None)]
        );
        assert!(parse("record").is_err());
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

    #[test]
    fn parses_slices_probes_and_lines() {
        let c = parse(
            "slice z 1000 dbz; slice x -2.5e3; slice off; probe 400 300.5; \
                       line 0,0,1000 5000,-2000,1000 w; key [; key }; key z",
        )
        .unwrap();
        assert_eq!(
            c,
            vec![
                Command::Slice(Some((Axis::Z, 1000.0, Some("dbz".into())))),
                Command::Slice(Some((Axis::X, -2500.0, None))),
                Command::Slice(None),
                Command::Probe([400.0, 300.5]),
                Command::Line(
                    [0.0, 0.0, 1000.0],
                    [5000.0, -2000.0, 1000.0],
                    Some("w".into())
                ),
                Command::Key(Action::Analysis(AnalysisKey::MoveSlice(-1))),
                Command::Key(Action::Analysis(AnalysisKey::MoveSlice(10))),
                Command::Key(Action::Analysis(AnalysisKey::CycleSliceAxis)),
            ]
        );
        for bad in [
            "slice w 10",
            "slice z",
            "slice z nan",
            "probe 1",
            "probe a b",
            "line 1,2 3,4,5",
            "line 1,2,3",
            "line 1,2,inf 0,0,0",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
