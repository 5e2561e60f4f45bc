// The job file's model section beyond Linear/ReLU stacks (tanh, gelu,
// dropout, layernorm, residual blocks) and the Residual module under it: each
// layer type parses, serialises back, builds and trains on .npy data the test
// writes; bad specs are errors naming the key path and value.
#include <hpu/trainer.hpp>

#include "fit_util.hpp"
#include "job_util.hpp"
#include "npy.hpp"
#include "test_util.hpp"

#include <cmath>

using namespace trainer_test;

namespace {

// Blobs (fit_util.hpp) as .npy files: features float32 [n, 16], labels int64 [n].
void write_blobs(const std::string &dir, const std::string &split, size_t n, uint64_t seed) {
  const hpu::TensorDataset d = blobs(n, seed);
  hpu::write_npy(dir + "/" + split + "_x.npy", {int64_t(n), 16}, d.features());
  std::vector<int64_t> y(d.labels().begin(), d.labels().end());
  hpu::write_npy(dir + "/" + split + "_y.npy", {int64_t(n)}, y);
}

std::string job_text(const std::string &dir, const std::string &layers, const std::string &precision = "32-true") {
  return R"({
  "model": {"layers": )" + layers + R"(},
  "data": {"name": "npy", "root": ")" + dir + R"(", "batch_size": 32,
           "train_features": "train_x.npy", "train_labels": "train_y.npy",
           "val_features": "val_x.npy", "val_labels": "val_y.npy"},
  "optimizer": {"name": "adamw", "lr": 0.01},
  "trainer": {"devices": 1, "max_epochs": 2, "seed": 3, "logger": false, "enable_checkpointing": false,
              "enable_progress_bar": false, "precision": ")" + precision + R"(", "default_root_dir": ")" + dir + R"("},
  "test": false
})";
}

struct Losses : hpu::Callback {
  std::string state_key() const override { return "Losses"; }
  void on_train_batch_end(hpu::Trainer &, const hpu::Metrics &out, int64_t) override { v.push_back(out.at("loss")); }
  std::vector<double> v;
};

double mean(const std::vector<double> &v, size_t from, size_t to) {
  double s = 0;
  for (size_t i = from; i < to; ++i) s += v[i];
  return s / double(to - from);
}

// A Fashion-MNIST job (the data section's default) with these layers, one a line.
std::string fashion_job(const std::string &layers) { return "{\"model\": {\"layers\": [\n" + layers + "\n]}}"; }

std::vector<float> host(const hpu::Tensor &t) { return t.to_vector<float>(); }

}  // namespace

// Each model trains two epochs of 8 steps on 256 samples: every loss is
// finite, and the last steps' mean is below the first steps'.
TEST(ModelSection, EachLayerTypeParsesServesBackBuildsAndTrains) {
  TempDir dir;
  write_blobs(dir.path(), "train", 256, 1);
  write_blobs(dir.path(), "val", 64, 2);
  struct Case {
    const char *name, *layers;
    size_t modules, params;
    const char *precision = "32-true";
  } cases[] = {
      {"linear relu", R"([{"type": "linear", "in_features": 16, "out_features": 32}, {"type": "relu"},
                          {"type": "linear", "in_features": 32, "out_features": 4}])", 3, 4},
      {"gelu", R"([{"type": "linear", "in_features": 16, "out_features": 32}, {"type": "gelu"},
                   {"type": "linear", "in_features": 32, "out_features": 4}])", 3, 4},
      {"tanh", R"([{"type": "linear", "in_features": 16, "out_features": 32}, {"type": "tanh"},
                   {"type": "linear", "in_features": 32, "out_features": 4, "bias": false}])", 3, 3},
      {"dropout", R"([{"type": "linear", "in_features": 16, "out_features": 32}, {"type": "relu"},
                      {"type": "dropout", "p": 0.1}, {"type": "linear", "in_features": 32, "out_features": 4}])", 4, 4},
      {"layernorm", R"([{"type": "linear", "in_features": 16, "out_features": 32}, {"type": "layernorm"},
                        {"type": "relu"}, {"type": "linear", "in_features": 32, "out_features": 4}])", 4, 6},
      {"residual", R"([{"type": "linear", "in_features": 16, "out_features": 32},
                       {"type": "residual", "layers": [{"type": "layernorm", "eps": 1e-6},
                                                       {"type": "linear", "in_features": 32, "out_features": 32},
                                                       {"type": "gelu"}, {"type": "dropout", "p": 0.1}]},
                       {"type": "relu"}, {"type": "linear", "in_features": 32, "out_features": 4}])", 4, 8},
      // A residual block first (its input is the data) and one inside another.
      {"nested residual", R"([{"type": "residual", "layers": [
                                 {"type": "linear", "in_features": 16, "out_features": 16}, {"type": "tanh"},
                                 {"type": "residual", "layers": [{"type": "linear", "in_features": 16,
                                                                  "out_features": 16}, {"type": "relu"}]}]},
                              {"type": "linear", "in_features": 16, "out_features": 4}])", 2, 6},
      {"residual bf16-mixed", R"([{"type": "linear", "in_features": 16, "out_features": 32},
                                  {"type": "residual", "layers": [{"type": "linear", "in_features": 32,
                                                                   "out_features": 32}, {"type": "gelu"}]},
                                  {"type": "linear", "in_features": 32, "out_features": 4}])", 3, 6, "bf16-mixed"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    hpu::Job job = hpu::parse_job(job_text(dir.path(), c.layers, c.precision), "job.json");
    // --check's output parses back to the same job.
    const std::string json = hpu::job_to_json(job);
    EXPECT_EQ(hpu::job_to_json(hpu::parse_job(json, "again")), json);
    hpu::Sequential net = hpu::Classifier::build(job.layers);
    EXPECT_EQ(net.size(), c.modules);
    hpu::Classifier model(net, job.optimizer, job.scheduler);
    hpu::Device dev(0);
    hpu::Rng rng(1);
    model.setup_device(dev.get(), rng);
    EXPECT_EQ(model.parameters().size(), c.params);

    auto losses = std::make_shared<Losses>();
    job.trainer.callbacks.push_back(losses);
    const hpu::JobResult r = hpu::run_job(job);
    EXPECT_EQ(r.global_step, 16);
    ASSERT_EQ(losses->v.size(), 16u);
    for (double l : losses->v) EXPECT_TRUE(std::isfinite(l)) << l;
    EXPECT_LT(mean(losses->v, 12, 16), 0.8 * mean(losses->v, 0, 4));
    EXPECT_GT(r.metrics.at("val_acc"), 0.5);
  }
}

TEST(ModelSection, ResidualAndLayernormServeBackAsWritten) {
  hpu::Job job = hpu::parse_job(fashion_job(R"({"type": "flatten"},
      {"type": "linear", "in_features": 784, "out_features": 8},
      {"type": "residual", "layers": [{"type": "layernorm"}, {"type": "tanh"}]},
      {"type": "linear", "in_features": 8, "out_features": 10})"),
                                "job.json");
  ASSERT_EQ(job.layers.size(), 4u);
  ASSERT_EQ(job.layers[2].layers.size(), 2u);
  // The layernorm's width comes from the layer before the block.
  EXPECT_EQ(job.layers[2].layers[0].normalized_shape, 8);
  const hpu::Job again = hpu::parse_job(hpu::job_to_json(job), "again");
  ASSERT_EQ(again.layers.size(), 4u);
  EXPECT_EQ(again.layers[2].type, "residual");
  ASSERT_EQ(again.layers[2].layers.size(), 2u);
  EXPECT_EQ(again.layers[2].layers[0].type, "layernorm");
  EXPECT_EQ(again.layers[2].layers[0].normalized_shape, 8);
  EXPECT_EQ(again.layers[2].layers[1].type, "tanh");
}

TEST(ModelSection, BadSpecsNameTheKeyPathAndValue) {
  const std::string head = R"({"type": "flatten"},
{"type": "linear", "in_features": 784, "out_features": 32},)";
  const std::string tail = R"(,
{"type": "linear", "in_features": 32, "out_features": 10})";
  auto with = [&](const std::string &layer) { return fashion_job(head + "\n" + layer + tail); };
  // A block whose layers change the width, also one inside another.
  EXPECT_EQ(job_error(with(R"({"type": "residual", "layers": [{"type": "linear", "in_features": 32, "out_features": 16}]})")),
            "job.json:4: model.layers[2]: the residual block's layers end with 16 features, but its input has 32; "
            "x + layers(x) needs layers that keep the width");
  EXPECT_EQ(job_error(with(R"({"type": "residual", "layers": [{"type": "relu"},
  {"type": "residual", "layers": [{"type": "linear", "in_features": 32, "out_features": 31}]}]})")),
            "job.json:5: model.layers[2].layers[1]: the residual block's layers end with 31 features, but its input "
            "has 32; x + layers(x) needs layers that keep the width");
  EXPECT_EQ(job_error(with(R"({"type": "residual", "layers": [{"type": "linear", "in_features": 16, "out_features": 32}]})")),
            "job.json:4: model.layers[2].layers[0].in_features: 16, but the previous layer gives 32 features");
  EXPECT_EQ(job_error(with(R"({"type": "residual", "layers": [{"type": "layernorm", "normalized_shape": 64}]})")),
            "job.json:4: model.layers[2].layers[0].normalized_shape: 64, but the previous layer gives 32 features");
  EXPECT_EQ(job_error(with(R"({"type": "residual", "layers": []})")),
            "job.json:4: model.layers[2].layers: expected a non-empty array of layers");
  EXPECT_EQ(job_error(with(R"({"type": "residual", "layers": {"type": "relu"}})")),
            "job.json:4: model.layers[2].layers: expected a non-empty array of layers");
  EXPECT_EQ(job_error(with(R"({"type": "residual"})")),
            "job.json:4: model.layers[2]: missing key \"layers\" (the block's layers: x + layers(x))");
  EXPECT_EQ(job_error(with(R"({"type": "residual", "layers": [{"type": "flatten"}]})")),
            "job.json:4: model.layers[2].layers[0].type: \"flatten\" cannot be inside a residual block: x + layers(x) "
            "needs layers that keep x's shape");
  EXPECT_EQ(job_error(with(R"({"type": "residual", "layers": [{"type": "embedding", "num_embeddings": 4, "embedding_dim": 32}]})")),
            "job.json:4: model.layers[2].layers[0].type: \"embedding\" cannot be inside a residual block: "
            "x + layers(x) needs layers that keep x's shape");
  EXPECT_EQ(job_error(with(R"({"type": "residual", "layers": [{"type": "relu"}], "p": 0.5})")),
            "job.json:4: model.layers[2].p: unknown key; known keys: layers, type");
  EXPECT_EQ(job_error(with(R"({"type": "tanh", "inplace": true})")),
            "job.json:4: model.layers[2].inplace: unknown key; known keys: type");
  EXPECT_EQ(job_error(with(R"({"type": "dropout", "p": 1})")),
            "job.json:4: model.layers[2].p: 1 is out of range [0, 0.999999]");
  EXPECT_EQ(job_error(with(R"({"type": "layernorm", "normalized_shape": 0})")),
            "job.json:4: model.layers[2].normalized_shape: 0 is out of range [1, 2147483647]");
  EXPECT_EQ(job_error(with(R"({"type": "sigmoid"})")),
            "job.json:4: model.layers[2].type: \"sigmoid\" is not one of \"linear\", \"relu\", \"gelu\", \"tanh\", "
            "\"dropout\", \"layernorm\", \"embedding\", \"flatten\", \"residual\"");
  // Images need a flatten before a linear layer, also inside a block.
  EXPECT_EQ(job_error(fashion_job(R"({"type": "residual", "layers": [{"type": "linear", "in_features": 28, "out_features": 28}]},
{"type": "flatten"}, {"type": "linear", "in_features": 784, "out_features": 10})")),
            "job.json:2: model.layers[0].layers[0]: a linear layer on unflattened samples; put a \"flatten\" layer first");
}

TEST(ModelSection, LayersAreCheckedAgainstTheFilesData) {
  TempDir dir;
  write_blobs(dir.path(), "train", 64, 1);
  write_blobs(dir.path(), "val", 32, 2);
  // Unknown at parse time (the files are read when the job runs): a
  // layernorm first needs its width.
  EXPECT_EQ(job_error(job_text(dir.path(), R"([{"type": "layernorm"}, {"type": "linear", "in_features": 16, "out_features": 4}])")),
            "job.json:2: model.layers[0]: missing key \"normalized_shape\" (the width before it is not known)");
  // Known when the job runs: 16 features, 4 classes.
  auto run_error = [&](const std::string &layers, const std::string &needle) {
    hpu::Job job = hpu::parse_job(job_text(dir.path(), layers), "job.json");
    EXPECT_HPU_ERROR(hpu::run_job(job), HPU_ERROR_CONFIG, needle);
  };
  run_error(R"([{"type": "linear", "in_features": 20, "out_features": 4}])",
            "model.layers[0].in_features: 20, but the data's samples have 16 features");
  run_error(R"([{"type": "residual", "layers": [{"type": "linear", "in_features": 20, "out_features": 20}]},
                {"type": "linear", "in_features": 20, "out_features": 4}])",
            "model.layers[0].layers[0].in_features: 20, but the data's samples have 16 features");
  run_error(R"([{"type": "linear", "in_features": 16, "out_features": 5}])",
            "model.layers[0]: the model ends with 5 features; the data has 4 classes, so cross-entropy needs 4 class "
            "scores (the largest label + 1; set data.num_classes when a class has no samples)");
  // With num_classes set, the parser checks the model's end.
  std::string text = job_text(dir.path(), R"([{"type": "linear", "in_features": 16, "out_features": 5}])");
  text.replace(text.find("\"batch_size\""), 0, "\"num_classes\": 4, ");
  EXPECT_EQ(job_error(text), "job.json:2: model.layers[0]: the model ends with 5 features; the data has 4 classes "
                            "(data.num_classes), so cross-entropy needs 4 class scores");
}

// examples/npy_residual.json trains on x.npy and y.npy as hpu-train(1) shows.
TEST(ModelSection, TheNpyResidualExampleTrains) {
  TempDir dir;
  const hpu::TensorDataset d = blobs(400, 1);
  hpu::write_npy(dir / "x.npy", {400, 16}, d.features());
  hpu::write_npy(dir / "y.npy", {400}, d.labels());
  hpu::Job job = hpu::load_job(std::string(HPU_SOURCE_DIR) + "/examples/npy_residual.json",
                               {{"data.root", dir.path(), "--data-root"},
                                {"trainer.default_root_dir", dir.path(), "--default-root-dir"},
                                {"trainer.max_epochs", "2", "--max-epochs"}});
  ASSERT_EQ(job.layers.size(), 4u);
  EXPECT_EQ(job.layers[1].layers[0].normalized_shape, 64);
  const hpu::JobResult r = hpu::run_job(job);
  EXPECT_EQ(r.global_step, 2 * 7);
  EXPECT_GT(r.metrics.at("val_acc"), 0.8);
}

// Residual: x + body(x), its backward the sum of both paths, checked against
// the same arithmetic on the host.
TEST(Residual, AddsItsInputAndSumsTheGradientsOfBothPaths) {
  hpu::Device dev(0);
  hpu::Sequential body;
  body.add(hpu::Linear(3, 3)).add(hpu::Tanh());
  hpu::Residual block(std::move(body));
  hpu::Rng rng(5);
  block.init(dev.get(), rng);
  std::vector<hpu::Parameter *> params;
  block.parameters(params, "net.1.");
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0]->name, "net.1.body.0.weight");
  EXPECT_EQ(params[1]->name, "net.1.body.0.bias");
  const std::vector<float> w = host(params[0]->value), b = host(params[1]->value);
  const std::vector<float> xv = {0.5f, -1.0f, 2.0f, -0.25f, 0.75f, 1.5f};
  const hpu::Tensor x = hpu::Tensor::from_host(dev.get(), HPU_FLOAT32, {2, 3}, xv.data());
  const std::vector<float> gv = {1.0f, -2.0f, 0.5f, 0.25f, 1.5f, -1.0f};
  const hpu::Tensor g = hpu::Tensor::from_host(dev.get(), HPU_FLOAT32, {2, 3}, gv.data());

  hpu::Context ctx;
  ctx.tape.require_input_grad();
  const std::vector<float> y = host(block.forward(ctx, x));
  const std::vector<float> gx = host(ctx.tape.backward(g));
  const std::vector<float> gw = host(params[0]->grad);
  ASSERT_EQ(y.size(), 6u);
  ASSERT_EQ(gx.size(), 6u);
  for (int n = 0; n < 2; ++n) {
    double h[3], gz[3];
    for (int o = 0; o < 3; ++o) {
      double z = b[o];
      for (int i = 0; i < 3; ++i) z += double(w[o * 3 + i]) * xv[n * 3 + i];
      h[o] = std::tanh(z);
      gz[o] = gv[n * 3 + o] * (1 - h[o] * h[o]);
      EXPECT_NEAR(y[n * 3 + o], xv[n * 3 + o] + h[o], 1e-5);
    }
    for (int i = 0; i < 3; ++i) {
      double through = 0;
      for (int o = 0; o < 3; ++o) through += double(w[o * 3 + i]) * gz[o];
      EXPECT_NEAR(gx[n * 3 + i], gv[n * 3 + i] + through, 1e-5);
    }
  }
  for (int o = 0; o < 3; ++o)
    for (int i = 0; i < 3; ++i) {
      double expect = 0;
      for (int n = 0; n < 2; ++n) {
        double z = b[o];
        for (int k = 0; k < 3; ++k) z += double(w[o * 3 + k]) * xv[n * 3 + k];
        expect += gv[n * 3 + o] * (1 - std::tanh(z) * std::tanh(z)) * xv[n * 3 + i];
      }
      EXPECT_NEAR(gw[o * 3 + i], expect, 1e-5);
    }

  // When nothing needs the input's gradient, the body's parameters still get theirs.
  hpu::Context ctx2;
  params[0]->zero_grad();
  block.forward(ctx2, x);
  EXPECT_FALSE(ctx2.tape.backward(g));
  EXPECT_EQ(host(params[0]->grad), gw);
}

TEST(Residual, ABodyThatChangesTheShapeIsAnError) {
  hpu::Device dev(0);
  hpu::Sequential body;
  body.add(hpu::Linear(3, 2));
  hpu::Residual block(std::move(body));
  hpu::Rng rng(5);
  block.init(dev.get(), rng);
  const std::vector<float> xv(6, 1.0f);
  const hpu::Tensor x = hpu::Tensor::from_host(dev.get(), HPU_FLOAT32, {2, 3}, xv.data());
  hpu::Context ctx;
  EXPECT_HPU_ERROR(block.forward(ctx, x), HPU_ERROR_INVALID_ARGUMENT,
                   "Residual: its body maps shape [2, 3] to [2, 2]; x + body(x) needs the same shape");
  // A clone has the same layers, without parameters until init.
  auto copy = block.clone();
  EXPECT_EQ(copy->name(), "Residual");
  std::vector<hpu::Parameter *> params;
  copy->parameters(params, "");
  EXPECT_EQ(params.size(), 2u);
  EXPECT_FALSE(params[0]->value);
}
