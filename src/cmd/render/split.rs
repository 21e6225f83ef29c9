//! `render --split space`: sort-last rendering across MPI ranks, for frames larger than one
//! GPU holds. The dataset is written in spatial bricks (`supercell-data … --bricks B`);
//! the ranks share them (`supercell::dataset::bricks::share_bricks`: one each where there
//! are as many bricks as ranks, else each rank a run of bricks that together make one box),
//! each rank reads only its bricks of every frame and draws only their boxes of the domain
//! (`Renderer::set_region`), one brick bound at a time and composited front to back on the
//! rank, and the ranks composite their premultiplied images front to back in visibility
//! order onto rank 0 (binary swap, `cluster::composite_within`), which adds what lies behind
//! the volume, tone-maps and writes the PNG. Sun shadows cross the parts: every brick's
//! coarse extinction cells are combined over all bricks and ranks before any brick is drawn
//! (`cluster::all_reduce_within`), so each draws with the whole frame's sun grid. The
//! picture equals one rank's render of the whole frame (tests/render_split.rs).
//!
//! One process (`Solo`) runs the same code and draws every brick itself.

use std::ops::Range;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use supercell::cluster::{
    CompositeError, Ranks, Solo, all_reduce_within, composite_within, visibility_order,
};
use supercell::dataset::{AlignedBuf, Dataset, GridEntry};
use supercell::format::Grid;
use supercell::render::{
    GpuContext, PremultipliedImage, Projection, Region, Renderer, combine_sun_extinction,
    premultiplied_over,
};
use supercell::scene::{LoadedScene, Scene};

use super::{
    RenderArgs, UploadedParts, apply_args, bind_uploaded, check_headers, check_size, open_renderer,
    parse_size, progress_bar, read_frame, save, shown_grids, upload_shown,
};

/// Runs `render --split space` over `frames` as one rank of the run an MPI launcher
/// started (or alone). A rank that fails ends the run (every rank) with its error.
pub(super) fn run(args: &RenderArgs, frames: Range<usize>) -> Result<()> {
    let ranks: Box<dyn Ranks> =
        crate::cmd::bench::launched_ranks()?.unwrap_or_else(|| Box::new(Solo));
    let outcome = run_rank(args, &*ranks, frames);
    match outcome {
        Err(e) if ranks.size() > 1 => {
            eprintln!("render --split space: rank {}: {e:#}", ranks.rank());
            ranks.abort(1)
        }
        other => other,
    }
}

/// What every rank has at hand for the run.
struct Setup {
    ls: LoadedScene,
    ctx: GpuContext,
    renderer: Renderer,
    /// Each rank's part of the domain (world box): the union of its bricks' boxes.
    parts: Vec<[[f64; 3]; 2]>,
    /// This rank's bricks, in the manifest's order.
    mine: Vec<OwnBrick>,
    /// The whole domain's world box.
    domain: [[f64; 3]; 2],
    /// How long a rank waits for another.
    wait: Option<Duration>,
}

fn run_rank(args: &RenderArgs, ranks: &dyn Ranks, frames: Range<usize>) -> Result<()> {
    let mut s = setup(args, ranks)?;
    let (w, h) = parse_size(&args.size)?;
    let n = s.ls.dataset.frame_count();
    if frames.is_empty() || frames.end > n {
        bail!("frames {frames:?} are not within the dataset's {n} frames");
    }
    let rank = ranks.rank();
    let bar = progress_bar(
        "render [{elapsed_precise}] {bar:30} {pos}/{len} frames  {msg}",
        frames.len() as u64,
    );
    let show_bar = rank == 0;
    if !show_bar {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let started = Instant::now();
    for f in frames.clone() {
        bar.set_message(format!("frame {f}, {w}x{h}, {} ranks", ranks.size()));
        let (image, spent) = render_part(args, ranks, &mut s, f, (w, h))?;
        let eye = order_point(&s.ls);
        let order = visibility_order(eye, &s.parts)
            .with_context(|| format!("{}: the ranks' parts", args.scene.display()))?;
        let t1 = Instant::now();
        let frame = u32::try_from(f).unwrap_or(u32::MAX);
        let whole = composite_within(ranks, &order, frame, image.rgba, premultiplied_over, s.wait)
            .map_err(|e| abort_on_silent(ranks, e))?;
        let composited = t1.elapsed();
        if let Some(rgba) = whole {
            let composite = PremultipliedImage {
                width: w,
                height: h,
                rgba,
            };
            let img = s.renderer.finish_premultiplied(&s.ls.view, &composite)?;
            bar.suspend(|| {
                eprintln!(
                    "frame {f}: {w}x{h} over {} ranks: rank 0 read its {} brick(s) in {:.1} ms, \
                     waited {:.1} ms for the others' boxes and sun cells, rendered its region in \
                     {:.1} ms; composited in {:.1} ms (order front to back: ranks {order:?})",
                    ranks.size(),
                    s.mine.len(),
                    spent.read_ms,
                    spent.exchange_ms,
                    spent.render_ms,
                    composited.as_secs_f64() * 1e3,
                )
            });
            bar.suspend(|| save(args, &s.ls, img, f))?;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    if rank == 0 {
        let secs = started.elapsed().as_secs_f64();
        eprintln!(
            "render: {} frames over {} ranks in {secs:.2} s ({:.2} frames/s)",
            frames.len(),
            ranks.size(),
            frames.len() as f64 / secs.max(1e-9)
        );
    }
    Ok(())
}

/// A rank that stopped answering ends the run from here, named ([`Ranks::abort`]); other
/// errors go back to the caller.
fn abort_on_silent(ranks: &dyn Ranks, e: CompositeError) -> anyhow::Error {
    if let CompositeError::Silent(silent) = &e {
        eprintln!("render --split space: rank {}: {silent}", ranks.rank());
        ranks.abort(3);
    }
    e.into()
}

/// One brick this rank draws.
struct OwnBrick {
    /// Its number in the manifest.
    index: usize,
    /// The dataset as this brick's part of it (reads only its bytes).
    dataset: Dataset,
    /// Its world box.
    world_box: [[f64; 3]; 2],
    /// The frame's bytes of this brick, read.
    slot: AlignedBuf,
}

/// Runs `work` with `ls` seeing `brick`'s part of the dataset (the scene, view and slots
/// are every brick's), then gives the part back.
fn on_brick<T>(
    ls: &mut LoadedScene,
    brick: &mut Dataset,
    work: impl FnOnce(&LoadedScene) -> T,
) -> T {
    std::mem::swap(&mut ls.dataset, brick);
    let out = work(ls);
    std::mem::swap(&mut ls.dataset, brick);
    out
}

/// Opens the scene, this rank's bricks of the dataset, its GPU and renderer.
fn setup(args: &RenderArgs, ranks: &dyn Ranks) -> Result<Setup> {
    let (w, h) = parse_size(&args.size)?;
    let scene = crate::cmd::with_dataset(Scene::load(&args.scene)?)?;
    let mut ls = scene.open(w as f32 / h as f32, args.attributes.as_deref())?;
    apply_args(args, &mut ls, w as f32 / h as f32);
    if ls.view.settings.transmittance_cutoff > 0.0 {
        // A region cannot know the transmittance of the regions in front of it.
        if ranks.rank() == 0 {
            eprintln!(
                "render --split space: rays are marched through every region to the end \
                 (transmittance_cutoff {} set to 0): the picture is one rank's render with \
                 `[settings] transmittance_cutoff = 0`",
                ls.view.settings.transmittance_cutoff
            );
        }
        ls.view.settings.transmittance_cutoff = 0.0;
    }
    let bricks = ls.dataset.bricks().to_vec();
    let manifest = ls.dataset.manifest().path().to_path_buf();
    if bricks.is_empty() {
        bail!(
            "{}: the dataset is not split into bricks: write it with --bricks N for a sort-last \
             render (or render it without --split)",
            manifest.display()
        );
    }
    let shares = supercell::dataset::bricks::share_bricks(&bricks, ranks.size()).map_err(|e| {
        anyhow::anyhow!(
            "{}: {} brick(s) over {} rank(s): {e}",
            manifest.display(),
            bricks.len(),
            ranks.size()
        )
    })?;
    let boxes: Vec<[[f64; 3]; 2]> = bricks.iter().map(|b| b.world_box).collect();
    let domain = union(&boxes);
    let parts = shares.iter().map(|r| union(&boxes[r.clone()])).collect();
    let mut mine = Vec::new();
    for index in shares[ranks.rank()].clone() {
        mine.push(OwnBrick {
            index,
            dataset: ls.dataset.retain_brick(u32::try_from(index)?)?,
            world_box: boxes[index],
            slot: AlignedBuf::new(),
        });
    }
    let ctx = open_context(ranks)?;
    if ranks.rank() == 0 {
        let counts: Vec<usize> = shares.iter().map(|r| r.len()).collect();
        eprintln!(
            "render --split space: {} bricks over {} ranks (bricks per rank {counts:?}), rank 0 \
             on {}",
            bricks.len(),
            ranks.size(),
            ctx.describe()
        );
    }
    let renderer = open_renderer(&ctx)?;
    check_size("--size", Some(&renderer), w, h)?;
    let wait = (!args.read_timeout.is_zero()).then_some(args.read_timeout);
    Ok(Setup {
        ls,
        ctx,
        renderer,
        parts,
        mine,
        domain,
        wait,
    })
}

/// The GPU of this rank: the `local_rank`-th of its host where the host has that many,
/// else the best adapter (several ranks on one GPU, as on a machine without one).
fn open_context(ranks: &dyn Ranks) -> Result<GpuContext> {
    let local = ranks.local_rank();
    if ranks.local_size() > 1 {
        match supercell::app::gpus::open_gpu(local) {
            Ok(g) => {
                return Ok(GpuContext {
                    adapter: g.gpu.adapter.clone(),
                    device: g.gpu.device.clone(),
                    queue: g.gpu.queue.clone(),
                    caps: g.gpu.caps.clone(),
                });
            }
            Err(e) => eprintln!(
                "render --split space: rank {}: {e}; rendering on the best adapter",
                ranks.rank()
            ),
        }
    }
    Ok(GpuContext::headless()?)
}

/// Where one rank's part of a frame took its time, milliseconds.
struct Spent {
    /// Reading its brick and binding it.
    read_ms: f64,
    /// The exchanges of the whole grids' boxes and the sun cells (waiting for the others).
    exchange_ms: f64,
    /// The sun cells of its region and the region's render, read back.
    render_ms: f64,
}

/// Draws this rank's part of frame `f`: reads its bricks, combines the sun's extinction
/// cells and the whole grids' boxes with the other ranks, and renders its bricks' regions,
/// composited front to back. With one brick it stays bound from the read to the render;
/// with several, each is bound in turn (for its sun cells, then for its region), so the
/// GPU holds one brick's grids at a time.
fn render_part(
    args: &RenderArgs,
    ranks: &dyn Ranks,
    s: &mut Setup,
    f: usize,
    (w, h): (u32, u32),
) -> Result<(PremultipliedImage, Spent)> {
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let t0 = Instant::now();
    let mut boxes: Vec<f32> = Vec::new();
    for b in &mut s.mine {
        let index = b.index;
        let mine = on_brick(&mut s.ls, &mut b.dataset, |ls| {
            check_budget(args, ls, f)?;
            read_frame(args, ls, f, &mut b.slot)?;
            check_headers(ls, f, &b.slot)?;
            grid_boxes(ls, f, &b.slot)
        })
        .with_context(|| format!("brick {index}"))?;
        if boxes.is_empty() {
            boxes = mine;
        } else {
            combine_boxes(&mut boxes, &mine);
        }
    }
    let single = s.mine.len() == 1;
    let mut _bound = if single {
        Some(bind_brick(args, s, 0, f)?)
    } else {
        None
    };
    let read_ms = ms(t0);
    let t1 = Instant::now();
    let all = all_reduce_within(ranks, &boxes, combine_boxes, s.wait)
        .map_err(|e| abort_on_silent(ranks, e))?;
    let whole_grids: Vec<_> = all.chunks_exact(6).map(floats_bbox).collect();
    let mut exchange_ms = ms(t1);
    let t2 = Instant::now();
    let mut cells: Option<Vec<f32>> = None;
    for i in 0..s.mine.len() {
        if !single {
            _bound = Some(bind_brick(args, s, i, f)?);
        }
        set_brick_region(s, i, &whole_grids)?;
        let mine = s.renderer.sun_extinction(&s.ls.view)?;
        match &mut cells {
            Some(acc) => combine_sun_extinction(acc, &mine),
            None => cells = Some(mine),
        }
    }
    let mut render_ms = ms(t2);
    let t3 = Instant::now();
    let cells = cells.context("a rank without bricks")?;
    let combined = all_reduce_within(ranks, &cells, combine_sun_extinction, s.wait)
        .map_err(|e| abort_on_silent(ranks, e))?;
    exchange_ms += ms(t3);
    let t4 = Instant::now();
    let own: Vec<[[f64; 3]; 2]> = s.mine.iter().map(|b| b.world_box).collect();
    let order = visibility_order(order_point(&s.ls), &own)
        .with_context(|| format!("{}: this rank's bricks", args.scene.display()))?;
    let mut image: Option<PremultipliedImage> = None;
    for i in order {
        if !single {
            _bound = Some(bind_brick(args, s, i, f)?);
            set_brick_region(s, i, &whole_grids)?;
            // Binding a frame forgets which view the cells were made for: made again here
            // (this brick's part of the combined cells, which replace them).
            s.renderer.sun_extinction(&s.ls.view)?;
        }
        s.renderer.set_sun_extinction(&combined)?;
        let part = s.renderer.render_premultiplied(&s.ls.view, w, h)?;
        image = Some(match image {
            None => part,
            Some(mut front) => {
                premultiplied_over(&mut front.rgba, &part.rgba);
                front
            }
        });
    }
    render_ms += ms(t4);
    Ok((
        image.context("a rank without bricks")?,
        Spent {
            read_ms,
            exchange_ms,
            render_ms,
        },
    ))
}

/// Uploads this rank's brick `i` of frame `f` (read into its slot) and binds it; the
/// buffers returned stay alive while it is drawn.
fn bind_brick(args: &RenderArgs, s: &mut Setup, i: usize, f: usize) -> Result<UploadedParts> {
    let (ctx, renderer, b) = (&s.ctx, &mut s.renderer, &mut s.mine[i]);
    let slot = &b.slot;
    on_brick(&mut s.ls, &mut b.dataset, |ls| {
        let grids = shown_grids(renderer, ls, f)?;
        let uploaded = upload_shown(ctx, renderer, slot, &grids)
            .with_context(|| format!("{}: frame {f}", args.scene.display()))?;
        bind_uploaded(renderer, &uploaded, &grids)?;
        Ok(uploaded)
    })
}

/// Draws only brick `i`'s box of the domain from now on.
fn set_brick_region(s: &mut Setup, i: usize, whole_grids: &[Option<[[i32; 3]; 2]>]) -> Result<()> {
    let brick = s.mine[i].world_box;
    s.renderer.set_region(Some(Region {
        lo: brick[0],
        hi: brick[1],
        domain_lo: s.domain[0],
        domain_hi: s.domain[1],
        whole_grids: whole_grids.to_vec(),
    }))?;
    Ok(())
}

/// `--frame-budget`: refuses frame `f` where the grids that would be bound at once (the
/// whole frame's, or one brick's where `ls` holds one brick's part of the dataset) exceed it.
pub(super) fn check_budget(args: &RenderArgs, ls: &LoadedScene, f: usize) -> Result<()> {
    let Some(budget) = args.frame_budget else {
        return Ok(());
    };
    let bytes: u64 = shown_entries(ls, f).iter().flatten().map(|g| g.size).sum();
    if bytes > budget {
        let brick = ls.dataset.manifest().retained_brick();
        bail!(
            "{}: frame {f}: the grids shown{} are {bytes} bytes, over --frame-budget {budget}: \
             split the frame over more bricks (a dataset written with --bricks N, rendered \
             with mpirun -n R supercell render --split space, R at most N)",
            ls.dataset.manifest().path().display(),
            brick.map_or(String::new(), |b| format!(" of brick {b}")),
        );
    }
    Ok(())
}

/// Per shown channel, the box of the grid of frame `f` in `slot` (inclusive index bbox), as
/// [`bbox_floats`] writes them: combined over every brick of every rank, the whole frame's
/// grid box, since each brick's grid holds every voxel of the whole grid in its box and
/// halo.
fn grid_boxes(ls: &LoadedScene, f: usize, slot: &[u8]) -> Result<Vec<f32>> {
    let grids = shown_entries(ls, f);
    let mut mine = Vec::with_capacity(grids.len() * 6);
    for g in &grids {
        let bbox = match g {
            Some(g) => {
                let bytes = slot
                    .get(g.offset as usize..(g.offset + g.size) as usize)
                    .context("a grid past the frame's bytes")?;
                let grid = Grid::parse(bytes).with_context(|| {
                    format!("{}: frame {f}", ls.dataset.manifest().path().display())
                })?;
                (grid.active_voxel_count() > 0).then(|| grid.index_bbox())
            }
            None => None,
        };
        mine.extend(bbox_floats(bbox));
    }
    Ok(mine)
}

/// Frame `f`'s grid of each channel the render shows (`None` for a channel it does not).
pub(super) fn shown_entries(ls: &LoadedScene, f: usize) -> Vec<Option<GridEntry>> {
    let frame = ls.dataset.frame(f);
    ls.slots
        .iter()
        .zip(&ls.view.attributes)
        .map(|(s, v)| {
            let a = (*s)?;
            v.as_ref().filter(|v| v.enabled)?;
            frame?
                .grids
                .iter()
                .find(|g| g.attribute as usize == a)
                .copied()
        })
        .collect()
}

/// A box as 6 floats (min then max; an absent box as an empty one, min above max). Index
/// coordinates are exact in `f32` below 2^24.
fn bbox_floats(bbox: Option<[[i32; 3]; 2]>) -> [f32; 6] {
    match bbox {
        Some([lo, hi]) => [
            lo[0] as f32,
            lo[1] as f32,
            lo[2] as f32,
            hi[0] as f32,
            hi[1] as f32,
            hi[2] as f32,
        ],
        None => [f32::MAX, f32::MAX, f32::MAX, f32::MIN, f32::MIN, f32::MIN],
    }
}

fn floats_bbox(v: &[f32]) -> Option<[[i32; 3]; 2]> {
    (v[0] <= v[3] && v[1] <= v[4] && v[2] <= v[5]).then(|| {
        [
            [v[0] as i32, v[1] as i32, v[2] as i32],
            [v[3] as i32, v[4] as i32, v[5] as i32],
        ]
    })
}

/// Union of boxes as [`bbox_floats`] writes them.
fn combine_boxes(acc: &mut [f32], next: &[f32]) {
    for (a, b) in acc.chunks_exact_mut(6).zip(next.chunks_exact(6)) {
        for k in 0..3 {
            a[k] = a[k].min(b[k]);
            a[k + 3] = a[k + 3].max(b[k + 3]);
        }
    }
}

fn union(boxes: &[[[f64; 3]; 2]]) -> [[f64; 3]; 2] {
    let mut u = [[f64::MAX; 3], [f64::MIN; 3]];
    for b in boxes {
        for k in 0..3 {
            u[0][k] = u[0][k].min(b[0][k]);
            u[1][k] = u[1][k].max(b[1][k]);
        }
    }
    u
}

/// The point the parts are ordered from: the eye, or for parallel rays a point far
/// behind the camera along its view direction.
fn order_point(ls: &LoadedScene) -> [f64; 3] {
    let cam = &ls.view.camera;
    let frame = cam.frame();
    let p = match cam.projection {
        Projection::Perspective => frame.eye,
        Projection::Orthographic => frame.eye - frame.forward * 1.0e7,
    };
    [f64::from(p.x), f64::from(p.y), f64::from(p.z)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boxes_travel_as_floats_and_combine_into_their_union() {
        let a = bbox_floats(Some([[0, 8, -16], [63, 31, 7]]));
        let b = bbox_floats(Some([[56, 0, -8], [127, 15, 15]]));
        let mut acc = bbox_floats(None);
        combine_boxes(&mut acc, &a);
        combine_boxes(&mut acc, &bbox_floats(None));
        combine_boxes(&mut acc, &b);
        assert_eq!(floats_bbox(&acc), Some([[0, 0, -16], [127, 31, 15]]));
        assert_eq!(floats_bbox(&bbox_floats(None)), None);
    }
}
